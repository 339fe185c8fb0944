/* memdesk chat client: one file for the chat page and the embeddable widget.
 *
 *   MemdeskChat.mount(container, {base, sessionId, token, lang, nonce})
 *
 * Streams replies over the WebSocket, reconnects with back-off and reloads
 * the history on every (re)connect, and shows clear error states. A "talk to
 * a person" button hands the conversation to staff (docs/handoff.md): the
 * status line says who answers, a staff member's replies and typing show, and
 * when the conversation ends the end user is offered a 1-5 rating. */
(function () {
  "use strict";
  var TEXT = {
    zh: {
      placeholder: "输入消息…", send: "发送", connecting: "正在连接…", online: "已连接",
      offline: "连接已断开，正在重连…", llm: "助手暂时不可用，请稍后重试。", retry: "重试",
      closed: "会话已结束。", denied: "无法打开此会话（凭证无效或已过期）。", rate: "消息太频繁，请稍候。",
      bad: "消息无法发送：", busy: "请等待当前回复完成。", you: "你", bot: "客服", confirm: "（请确认）",
      human: "转人工", end: "结束对话", waiting: "正在为您转接人工客服，您排在第 {n} 位", waitingNoPos: "正在为您转接人工客服",
      withHuman: "人工客服为您服务中", ai: "智能助手为您服务", staff: "人工客服", typing: "客服正在输入…",
      leave: "暂时没有客服在线：请留下您的问题和联系方式（电话或邮箱），我们会尽快联系您。",
      rate: "请为本次服务评分：", comment: "想说的话（可选）", submit: "提交", thanks: "感谢您的评价！",
      sources: "来源：",
    },
    en: {
      placeholder: "Type a message…", send: "Send", connecting: "Connecting…", online: "Connected",
      offline: "Connection lost, reconnecting…", llm: "The assistant is unavailable; please retry shortly.",
      retry: "Retry", closed: "This conversation has ended.", denied: "This conversation cannot be opened (invalid or expired link).",
      rate: "Too many messages; please wait a moment.", bad: "Message not sent: ", busy: "Please wait for the current reply.",
      you: "You", bot: "Agent", confirm: " (please confirm)",
      human: "Talk to a person", end: "End chat", waiting: "Connecting you to a person: you are number {n} in the queue",
      waitingNoPos: "Connecting you to a person", withHuman: "A person is answering", ai: "The assistant is answering",
      staff: "Staff", typing: "Staff is typing…",
      leave: "Nobody is available right now: leave your question and a phone number or e-mail, and we will get back to you.",
      rate: "How did we do?", comment: "Anything to add (optional)", submit: "Send", thanks: "Thank you for your rating!",
      sources: "Sources: ",
    },
  };
  var CSS =
    ".mdk{font:14px/1.45 system-ui,'Noto Sans CJK SC','WenQuanYi Micro Hei',sans-serif;display:flex;flex-direction:column;height:100%;border:1px solid #d0d7de;border-radius:8px;background:#fff;color:#1f2328}" +
    ".mdk-status{padding:6px 10px;font-size:12px;color:#57606a;border-bottom:1px solid #eaeef2}" +
    ".mdk-status.err{color:#cf222e}.mdk-log{flex:1;overflow-y:auto;padding:10px}" +
    ".mdk-msg{margin:6px 0;padding:8px 10px;border-radius:8px;max-width:85%;white-space:pre-wrap;word-wrap:break-word}" +
    ".mdk-user{background:#ddf4ff;margin-left:auto}.mdk-assistant{background:#f6f8fa}.mdk-partial{opacity:.7}" +
    ".mdk-staff{background:#dafbe1}.mdk-note{margin:6px auto;font-size:12px;color:#57606a;text-align:center}" +
    ".mdk-human{padding:8px 10px;border:1px solid #d0d7de;border-radius:6px;background:#fff;font:inherit;cursor:pointer}" +
    ".mdk-rating{padding:8px;border-top:1px solid #eaeef2;display:flex;flex-wrap:wrap;gap:6px;align-items:center}" +
    ".mdk-star{padding:4px 10px;border:1px solid #d0d7de;border-radius:6px;background:#fff;cursor:pointer;font:inherit}" +
    ".mdk-star[aria-pressed=true]{background:#ffd33d}.mdk-rating input{flex:1;min-width:120px;padding:6px}" +
    ".mdk-form{display:flex;gap:6px;padding:8px;border-top:1px solid #eaeef2}" +
    ".mdk-input{flex:1;padding:8px;border:1px solid #d0d7de;border-radius:6px;font:inherit}" +
    ".mdk-send{padding:8px 14px;border:0;border-radius:6px;background:#1f883d;color:#fff;font:inherit;cursor:pointer}" +
    ".mdk-send:disabled{background:#94d3a2;cursor:default}" +
    ".mdk-msg p{margin:0 0 6px}.mdk-msg p:last-child{margin:0}.mdk-msg ul,.mdk-msg ol{margin:2px 0 6px;padding-left:20px;white-space:normal}" +
    ".mdk-msg code{background:#eaeef2;padding:0 3px;border-radius:3px;font-family:monospace}" +
    ".mdk-sources{margin-top:6px;font-size:12px;color:#57606a;white-space:normal}.mdk-sources a,.mdk-sources span{margin-right:8px}" +
    ".mdk-msg pre{margin:4px 0;padding:6px;background:#eaeef2;border-radius:4px;overflow-x:auto}.mdk-msg pre code{padding:0}";

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text) node.textContent = text;
    return node;
  }

  // Replies are Markdown (models answer in it). They are drawn as DOM nodes built here: text only ever through
  // text nodes, a link only to an http(s) address, never markup from the reply, so a reply cannot inject an
  // element, a handler or a script. Paragraphs, line breaks, lists, headings (as bold lines), code, bold,
  // italics and links; anything else stays the text it was.
  var INLINE = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*|__[^_\n]+__)|(\*[^*\s][^*\n]*\*|_[^_\s][^_\n]*_)|(\[[^\]\n]+\]\([^)\s]+\))/;
  var ITEM = /^\s*([-*+]|\d+[.)])\s+(.*)$/;

  function inline(parent, text) {
    while (text) {
      var m = INLINE.exec(text);
      if (!m) { parent.appendChild(document.createTextNode(text)); return; }
      if (m.index) parent.appendChild(document.createTextNode(text.slice(0, m.index)));
      var token = m[0], node;
      if (m[1]) { node = el("code", "", token.slice(1, -1)); }
      else if (m[2]) { node = el("strong"); inline(node, token.slice(2, -2)); }
      else if (m[3]) { node = el("em"); inline(node, token.slice(1, -1)); }
      else {
        var split = token.indexOf("](");
        var href = token.slice(split + 2, -1);
        if (/^https?:\/\//i.test(href)) {
          node = el("a"); node.href = href; node.target = "_blank"; node.rel = "noopener noreferrer nofollow";
          inline(node, token.slice(1, split));
        } else {
          node = document.createTextNode(token);
        }
      }
      parent.appendChild(node);
      text = text.slice(m.index + token.length);
    }
  }

  function renderMarkdown(target, text) {
    target.textContent = "";
    var lines = String(text || "").split("\n"), i = 0, para = [];
    function flush() {
      if (!para.length) return;
      var p = el("p"); inline(p, para.join("\n")); target.appendChild(p); para = [];
    }
    while (i < lines.length) {
      var line = lines[i], found;
      if (/^```/.test(line)) {
        flush();
        var code = [];
        for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
        i++;
        var pre = el("pre"); pre.appendChild(el("code", "", code.join("\n"))); target.appendChild(pre);
      } else if ((found = /^#{1,6}\s+(.*)$/.exec(line))) {
        flush();
        var heading = el("p"), strong = el("strong"); inline(strong, found[1]); heading.appendChild(strong);
        target.appendChild(heading); i++;
      } else if ((found = ITEM.exec(line))) {
        flush();
        var ordered = /\d/.test(found[1]), list = el(ordered ? "ol" : "ul");
        for (; i < lines.length && (found = ITEM.exec(lines[i])) && /\d/.test(found[1]) === ordered; i++) {
          var li = el("li"); inline(li, found[2]); list.appendChild(li);
        }
        target.appendChild(list);
      } else if (!line.trim()) {
        flush(); i++;
      } else {
        para.push(line); i++;
      }
    }
    flush();
    // one paragraph is drawn as the bubble's own text, as before Markdown: nothing to wrap
    var only = target.firstChild;
    if (only && !only.nextSibling && only.nodeName === "P") {
      while (only.firstChild) target.insertBefore(only.firstChild, only);
      target.removeChild(only);
    }
  }

  // The styles go in as a constructed stylesheet where the browser has them: that is not inline CSS, so a
  // strict Content-Security-Policy (memdesk's own page, or a tenant's site hosting the widget) lets it
  // apply. Elsewhere a <style> element, carrying the page's CSP nonce when it has one.
  function addStyles(root, nonce, css) {
    css = css || CSS;
    if ("adoptedStyleSheets" in root && typeof CSSStyleSheet === "function" && "replaceSync" in CSSStyleSheet.prototype) {
      var sheet = new CSSStyleSheet(); sheet.replaceSync(css);
      root.adoptedStyleSheets = root.adoptedStyleSheets.concat([sheet]);
      return;
    }
    var style = el("style"); if (nonce) style.nonce = nonce;
    style.textContent = css; root.appendChild(style);
  }

  function mount(container, opts) {
    var lang = (opts.lang || navigator.language || "zh").toLowerCase().indexOf("zh") === 0 ? "zh" : "en";
    var t = TEXT[lang];
    var root = container.attachShadow ? container.attachShadow({ mode: "open" }) : container;
    addStyles(root, opts.nonce);
    var box = el("div", "mdk"), status = el("div", "mdk-status", t.connecting), log = el("div", "mdk-log");
    var form = el("form", "mdk-form"), input = el("input", "mdk-input"), send = el("button", "mdk-send", t.send);
    var human = el("button", "mdk-human", t.human), end = el("button", "mdk-human", t.end);
    input.placeholder = t.placeholder; input.setAttribute("aria-label", t.placeholder); send.type = "submit";
    human.type = "button"; end.type = "button"; human.setAttribute("data-action", "handoff"); end.setAttribute("data-action", "close");
    form.appendChild(input); form.appendChild(send); form.appendChild(human); form.appendChild(end);
    box.appendChild(status); box.appendChild(log); box.appendChild(form); root.appendChild(box);

    var ws = null, attempts = 0, stopped = false, pending = null, replies = {}, seq = 0;
    var state = "ai", typingTimer = null, lastTyping = 0, rating = null;
    var base = (opts.base || location.origin).replace(/\/$/, "");
    var wsBase = base.replace(/^http/, "ws");

    function setStatus(text, isError) { status.textContent = text; status.className = "mdk-status" + (isError ? " err" : ""); }
    function scroll() { log.scrollTop = log.scrollHeight; }
    function bubble(role, text, extra) {
      var node = el("div", "mdk-msg mdk-" + role + (extra ? " " + extra : ""), text);
      node.setAttribute("data-role", role);
      log.appendChild(node); scroll(); return node;
    }
    function busy(on) { send.disabled = on; }
    // The articles a reply cited (the done frame's citations) as source links under it. Only http(s) links are
    // followed; the title is text, never markup.
    function showSources(node, citations) {
      if (!citations || !citations.length) return;
      var box = el("div", "mdk-sources", t.sources);
      citations.forEach(function (c) {
        var safe = /^https?:\/\//i.test(c.url || "");
        var link = el(safe ? "a" : "span", "mdk-source", c.title || c.passage_id);
        if (safe) { link.href = c.url; link.target = "_blank"; link.rel = "noopener noreferrer"; }
        link.setAttribute("data-article-id", c.article_id); link.setAttribute("data-version", String(c.version));
        link.setAttribute("data-passage-id", c.passage_id);
        box.appendChild(link);
      });
      node.appendChild(box); scroll();
    }

    function connect() {
      setStatus(t.connecting);
      ws = new WebSocket(wsBase + "/ws/chat/?session_id=" + encodeURIComponent(opts.sessionId) + "&token=" + encodeURIComponent(opts.token));
      ws.onopen = function () { attempts = 0; setStatus(t.online); ws.send(JSON.stringify({ type: "history", limit: 50 })); };
      ws.onmessage = function (event) {
        var f = JSON.parse(event.data);
        if (f.type === "history") {
          log.textContent = "";
          f.messages.forEach(function (m) {
            var shown = bubble(m.role, m.text, m.status === "partial" ? "mdk-partial" : "");
            if (m.role === "assistant" || m.role === "staff") renderMarkdown(shown, m.text);
            if (m.role === "assistant") showSources(shown, m.citations);
          });
          if (f.state) showState({ state: f.state });
        } else if (f.type === "ack") {
          if (pending && pending.id === f.client_msg_id) pending.node.setAttribute("data-message-id", f.message_id);
        } else if (f.type === "delta") {
          var node = replies[f.reply_id] || (replies[f.reply_id] = bubble(f.role === "staff" ? "staff" : "assistant", ""));
          node.textContent += f.text; scroll();
        } else if (f.type === "done") {
          var done = replies[f.reply_id] || (replies[f.reply_id] = bubble(f.role === "staff" ? "staff" : "assistant", ""));
          renderMarkdown(done, f.text);  // streamed as plain text, drawn as Markdown once whole
          showSources(done, f.citations);
          done.setAttribute("data-done", "1");
          if (f.role !== "staff") { pending = null; busy(false); }
        } else if (f.type === "state") {
          showState(f);
          if (pending && f.state !== "ai") { pending = null; busy(false); }
        } else if (f.type === "typing") {
          setStatus(t.typing);
          clearTimeout(typingTimer);
          typingTimer = setTimeout(function () { showState({ state: state }); }, 3000);
        } else if (f.type === "rated") {
          if (rating) { rating.textContent = t.thanks; rating.setAttribute("data-rated", String(f.score)); }
        } else if (f.type === "error") {
          var msg = f.code === "llm_unavailable" ? t.llm : f.code === "rate_limited" ? t.rate : f.code === "turn_in_progress" ? t.busy : f.code === "rejected" ? t.denied : t.bad + f.message;
          setStatus(msg, true);
          if (f.code === "llm_unavailable" && pending) offerRetry(pending);
          busy(false);
        }
      };
      ws.onclose = function (event) {
        if (event.code === 4401 || event.code === 4400 || event.code === 4404 || event.code === 4403) { stopped = true; setStatus(t.denied, true); busy(true); return; }
        if (event.code === 4410) { stopped = true; if (state !== "closed") { setStatus(t.closed, true); busy(true); } return; }
        if (stopped) return;
        setStatus(t.offline, true);
        attempts += 1;
        setTimeout(connect, Math.min(10000, 500 * Math.pow(2, attempts)));
      };
    }

    function note(text) { var n = el("div", "mdk-note", text); log.appendChild(n); scroll(); return n; }

    // Who answers: the status line says it; a message left while nobody is available is offered once.
    function showState(f) {
      var was = state;
      state = f.state;
      box.setAttribute("data-state", state);
      if (state === "waiting_for_human") setStatus(f.position ? t.waiting.replace("{n}", f.position) : t.waitingNoPos);
      else if (state === "with_human") setStatus(t.withHuman);
      else if (state === "ai") setStatus(was === "ai" ? t.online : t.ai);
      else if (state === "closed") { setStatus(t.closed); busy(true); input.disabled = true; offerRating(); }
      human.disabled = state !== "ai";
      if (f.leave_message && !box.getAttribute("data-leave")) { box.setAttribute("data-leave", "1"); note(t.leave); }
    }

    // The end of the conversation: 1-5 and an optional comment, sent on this socket ({"type": "rating"}).
    function offerRating() {
      if (rating) return;
      rating = el("div", "mdk-rating"); rating.appendChild(el("span", "", t.rate));
      var chosen = 0, comment = el("input"), submit = el("button", "mdk-send", t.submit);
      comment.placeholder = t.comment; comment.setAttribute("aria-label", t.comment); submit.type = "button"; submit.disabled = true;
      [1, 2, 3, 4, 5].forEach(function (n) {
        var star = el("button", "mdk-star", String(n)); star.type = "button"; star.setAttribute("data-score", String(n));
        star.addEventListener("click", function () {
          chosen = n; submit.disabled = false;
          rating.querySelectorAll(".mdk-star").forEach(function (s) { s.setAttribute("aria-pressed", s === star ? "true" : "false"); });
        });
        rating.appendChild(star);
      });
      submit.addEventListener("click", function () {
        if (chosen && ws && ws.readyState === 1) ws.send(JSON.stringify({ type: "rating", score: chosen, comment: comment.value.trim() || null }));
      });
      rating.appendChild(comment); rating.appendChild(submit); box.appendChild(rating);
    }

    human.addEventListener("click", function () { if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: "handoff" })); });
    end.addEventListener("click", function () { if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: "close" })); });
    input.addEventListener("input", function () {
      var now = Date.now();
      if (state !== "ai" && ws && ws.readyState === 1 && now - lastTyping > 1500) { lastTyping = now; ws.send(JSON.stringify({ type: "typing" })); }
    });

    function offerRetry(p) {
      var again = el("button", "mdk-send", t.retry);
      again.onclick = function () { again.remove(); transmit(p.text, p.id); };
      status.appendChild(document.createTextNode(" ")); status.appendChild(again);
    }

    function transmit(text, id) {
      pending = pending && pending.id === id ? pending : { id: id, text: text, node: bubble("user", text) };
      busy(true);
      ws.send(JSON.stringify({ type: "message", text: text, client_msg_id: id }));
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var text = input.value.trim();
      if (!text || !ws || ws.readyState !== 1) return;
      input.value = "";
      seq += 1;
      transmit(text, "web-" + Date.now().toString(36) + "-" + seq);
    });
    connect();
    return { close: function () { stopped = true; if (ws) ws.close(); } };
  }

  // el and addStyles are shared with memories.js, which is always loaded after this file.
  window.MemdeskChat = { mount: mount, el: el, addStyles: addStyles };
})();
