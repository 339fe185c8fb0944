/* memdesk "What we remember about you": the end user's own memories, beside the chat.
 *
 *   MemdeskMemories.mount(container, {base, sessionId, token, lang, nonce})
 *
 * One file for the chat page and the embeddable widget, loaded after chat.js (whose DOM helpers it uses).
 * A collapsed panel; opened, it lists what memdesk remembers about this end user (GET /api/v1/me/memories, phone numbers and e-mail masked),
 * each with "This is wrong" (a small form: the right words, POST …/correct) and "Forget this" (POST …/forget),
 * and the end user's own on/off switch where the tenant allows it (PUT /api/v1/me/memories).
 *
 * Under a strict Content-Security-Policy: no inline handler or markup, text only through textContent, styles
 * as a constructed stylesheet (or a <style> carrying the page's nonce). The panel calls the API only once it is
 * opened, so a tenant's site that lets the widget's socket through but not its HTTPS calls still shows the
 * chat without a violation. */
(function () {
  "use strict";
  var TEXT = {
    zh: {
      title: "我们记得的关于您的信息", empty: "目前没有记住关于您的信息。", loading: "正在加载…",
      wrong: "这不对", forget: "忘掉这条", save: "保存", cancel: "取消", fix: "正确的是…",
      remember: "记住我的信息", off: "已关闭：不会再记住关于您的新信息。",
      tenantOff: "本服务不会记住新的信息。", failed: "操作失败：", denied: "无法读取（凭证无效或已过期）。",
    },
    en: {
      title: "What we remember about you", empty: "We don't remember anything about you yet.", loading: "Loading…",
      wrong: "This is wrong", forget: "Forget this", save: "Save", cancel: "Cancel", fix: "What is right…",
      remember: "Remember things about me", off: "Off: nothing new about you is remembered.",
      tenantOff: "This service does not remember new information.", failed: "Could not do that: ",
      denied: "Cannot be read (invalid or expired link).",
    },
  };
  var CSS =
    ".mdm{font:13px/1.45 system-ui,'Noto Sans CJK SC','WenQuanYi Micro Hei',sans-serif;color:#1f2328;background:#fff;border:1px solid #d0d7de;border-radius:8px}" +
    ".mdm-summary{padding:6px 10px;cursor:pointer;font-weight:600}" +
    ".mdm-body{padding:0 10px 8px;max-height:240px;overflow-y:auto}" +
    ".mdm-list{list-style:none;margin:0;padding:0}" +
    ".mdm-item{padding:6px 0;border-top:1px solid #eaeef2}" +
    ".mdm-text{display:block;margin-bottom:4px;white-space:pre-wrap;word-wrap:break-word}" +
    ".mdm-act{margin-right:6px;padding:2px 8px;border:1px solid #d0d7de;border-radius:6px;background:#f6f8fa;font:inherit;cursor:pointer}" +
    ".mdm-fix{display:flex;gap:6px;margin-top:4px}.mdm-fix[hidden]{display:none}" +
    ".mdm-input{flex:1;padding:4px 6px;border:1px solid #d0d7de;border-radius:6px;font:inherit}" +
    ".mdm-note{color:#57606a;margin:4px 0}.mdm-note.err{color:#cf222e}.mdm-switch{display:block;margin:4px 0}" +
    "[hidden]{display:none !important}";

  // The DOM helpers chat.js shares (the page and the widget load it first): one way to add styles under a CSP.
  var el = window.MemdeskChat.el;
  function addStyles(root, nonce) { window.MemdeskChat.addStyles(root, nonce, CSS); }

  function mount(container, opts) {
    var lang = (opts.lang || navigator.language || "zh").toLowerCase().indexOf("zh") === 0 ? "zh" : "en";
    var t = TEXT[lang];
    var base = (opts.base || location.origin).replace(/\/$/, "") + "/api/v1/me/memories";
    var root = container.attachShadow ? container.attachShadow({ mode: "open" }) : container;
    addStyles(root, opts.nonce);
    var panel = el("details", "mdm"), summary = el("summary", "mdm-summary", t.title), body = el("div", "mdm-body");
    var note = el("p", "mdm-note"), list = el("ul", "mdm-list");
    var switchBox = el("label", "mdm-switch"), toggle = el("input", "mdm-toggle");
    toggle.type = "checkbox";
    switchBox.appendChild(toggle); switchBox.appendChild(document.createTextNode(" " + t.remember)); switchBox.hidden = true;
    body.appendChild(switchBox); body.appendChild(note); body.appendChild(list);
    panel.appendChild(summary); panel.appendChild(body); root.appendChild(panel);

    function say(text, isError) { note.textContent = text || ""; note.className = "mdm-note" + (isError ? " err" : ""); }

    function call(method, path, payload) {
      var init = { method: method, headers: { "X-Session-ID": opts.sessionId, "X-Session-Token": opts.token } };
      if (payload !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(payload); }
      return fetch(base + path, init).then(function (response) {
        return response.json().then(function (data) {
          if (!response.ok) throw new Error(response.status === 401 ? t.denied : t.failed + ((data.error && data.error.message) || response.status));
          return data;
        });
      });
    }

    function item(memory) {
      var row = el("li", "mdm-item"), text = el("span", "mdm-text", memory.content);
      var wrong = el("button", "mdm-act mdm-wrong", t.wrong), forget = el("button", "mdm-act mdm-forget", t.forget);
      var form = el("form", "mdm-fix"), input = el("input", "mdm-input"), save = el("button", "mdm-act mdm-save", t.save);
      var cancel = el("button", "mdm-act mdm-cancel", t.cancel);
      row.setAttribute("data-memory-id", memory.id);
      wrong.type = forget.type = cancel.type = "button"; save.type = "submit";
      input.placeholder = t.fix; input.setAttribute("aria-label", t.fix); input.maxLength = 150;
      form.hidden = true;
      form.appendChild(input); form.appendChild(save); form.appendChild(cancel);
      row.appendChild(text); row.appendChild(wrong); row.appendChild(forget); row.appendChild(form);
      wrong.addEventListener("click", function () { form.hidden = false; input.focus(); });
      cancel.addEventListener("click", function () { form.hidden = true; input.value = ""; });
      forget.addEventListener("click", function () { act(call("POST", "/" + memory.id + "/forget")); });
      form.addEventListener("submit", function (event) {
        event.preventDefault();
        var words = input.value.trim();
        if (words) act(call("POST", "/" + memory.id + "/correct", { content: words }));
      });
      return row;
    }

    function render(data) {
      switchBox.hidden = !data.can_turn_off;
      toggle.checked = !!data.memory_enabled;
      list.textContent = "";
      data.memories.forEach(function (memory) { list.appendChild(item(memory)); });
      say(!data.memory_enabled ? (data.can_turn_off ? t.off : t.tenantOff) : data.memories.length ? "" : t.empty);
      panel.setAttribute("data-loaded", "1");
    }

    function fail(error) { say(error.message, true); panel.setAttribute("data-loaded", "1"); }
    function load() { panel.removeAttribute("data-loaded"); say(t.loading); return call("GET", "").then(render, fail); }
    function act(request) { panel.removeAttribute("data-loaded"); return request.then(load, fail); }

    toggle.addEventListener("change", function () {
      panel.removeAttribute("data-loaded");
      call("PUT", "", { memory_enabled: toggle.checked }).then(render, function (error) { fail(error); load(); });
    });
    panel.addEventListener("toggle", function () { if (panel.open) load(); });
    return { reload: load };
  }

  window.MemdeskMemories = { mount: mount };
})();
