/* memdesk widget — paste into your site:
 *   <script src="{{ base }}/widget.js" data-session-id="…" data-token="…" data-lang="zh" async></script>
 * Your back end creates the session (POST /api/v1/sessions) and prints its
 * session_id and token into the tag. Your site's origin must be listed in the
 * tenant's allowed origins. */
(function () {
  var base = "{{ base|escapejs }}";
  var tag = document.currentScript;
  function start() {
    var holder = document.createElement("div");
    holder.style.cssText = "position:fixed;right:16px;bottom:16px;width:360px;height:520px;max-height:80vh;z-index:2147483000;box-shadow:0 8px 24px rgba(0,0,0,.2);border-radius:8px";
    document.body.appendChild(holder);
    window.MemdeskChat.mount(holder, {base: base, sessionId: tag.dataset.sessionId, token: tag.dataset.token, lang: tag.dataset.lang});
  }
  var s = document.createElement("script");
  s.src = base + "{{ chat_js }}";
  s.onload = start;
  document.head.appendChild(s);
})();
