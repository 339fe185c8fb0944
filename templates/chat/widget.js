{% load static %}{% static 'memdesk/memories.js' as memories_js %}/* memdesk widget — paste into your site:
 *   <script src="{{ base }}/widget.js" data-session-id="…" data-token="…" data-lang="zh" async></script>
 * Your back end creates the session (POST /api/v1/sessions) and prints its
 * session_id and token into the tag. Your site's origin must be listed in the
 * tenant's allowed origins. Under a Content-Security-Policy, allow memdesk's
 * origin in script-src, and in connect-src both its WebSocket origin (the chat)
 * and its https origin (the "What we remember about you" panel, which calls
 * memdesk's API once the visitor opens it). */
(function () {
  var base = "{{ base|escapejs }}";
  var tag = document.currentScript;
  var scripts = ["{{ chat_js|escapejs }}", "{{ memories_js|escapejs }}"];
  function start() {
    var opts = {base: base, sessionId: tag.dataset.sessionId, token: tag.dataset.token, lang: tag.dataset.lang};
    var holder = document.createElement("div");
    holder.style.cssText = "position:fixed;right:16px;bottom:16px;width:360px;height:520px;max-height:80vh;z-index:2147483000;box-shadow:0 8px 24px rgba(0,0,0,.2);border-radius:8px;display:flex;flex-direction:column;background:#fff";
    var chat = document.createElement("div");
    chat.style.cssText = "flex:1 1 auto;min-height:0";
    // "What we remember about you" (collapsed): the visitor's own memories, "This is wrong", "Forget this".
    var memories = document.createElement("div");
    memories.style.cssText = "flex:0 0 auto;max-height:50%;overflow:auto";
    holder.appendChild(chat);
    holder.appendChild(memories);
    document.body.appendChild(holder);
    window.MemdeskChat.mount(chat, opts);
    window.MemdeskMemories.mount(memories, opts);
  }
  function load(index) {
    if (index === scripts.length) return start();
    var s = document.createElement("script");
    s.src = base + scripts[index];
    s.onload = function () { load(index + 1); };
    document.head.appendChild(s);
  }
  load(0);
})();
