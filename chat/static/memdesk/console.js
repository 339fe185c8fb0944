/* memdesk staff console (/staff/console/): the live queue and the conversation a staff member takes over.
 *
 * Talks to ws/staff/ (chat/handoff/consumer.py; frames in docs/api-extensions.md). Every piece of text from the
 * server is put in with textContent, never as markup; handlers are attached here, never inline (the page's
 * CSP refuses inline handlers). Pings every 20 s: that is also how memdesk knows someone is online.
 * Its words come from the page, in the staff member's language: the JSON block #mdk-console-text
 * (chat/handoff/console_text.py); "{name}" in one is filled in by t(). */
(function () {
  "use strict";
  var root = document.getElementById("mdk-console");
  if (!root) return;
  var $ = function (id) { return document.getElementById(id); };
  var words = {};
  try { words = JSON.parse($("mdk-console-text").textContent); } catch (e) { words = {}; }
  function t(key, values) {
    var text = words[key] !== undefined ? String(words[key]) : key;
    return text.replace(/\{(\w+)\}/g, function (all, name) {
      return values && values[name] !== undefined ? String(values[name]) : all;
    });
  }
  function stateName(state) { var name = t("state_" + state); return name === "state_" + state ? state : name; }
  var statusLine = $("mdk-status"), list = $("mdk-queue-list"), empty = $("mdk-queue-empty");
  var panel = $("mdk-session"), noteBox = $("mdk-note"), log = $("mdk-log"), typing = $("mdk-typing");
  var form = $("mdk-reply-form"), text = $("mdk-reply-text"), claimButton = $("mdk-claim"), releaseButton = $("mdk-release");
  var ws = null, attempts = 0, current = null, sessions = {}, typingTimer = null, lastTyping = 0, pinger = null;

  function el(tag, cls, content) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (content !== undefined && content !== null) node.textContent = String(content);
    return node;
  }
  function setStatus(message, isError) { statusLine.textContent = message; statusLine.className = "mdk-status" + (isError ? " err" : ""); }
  function send(frame) { if (ws && ws.readyState === 1) ws.send(JSON.stringify(frame)); }

  function drawQueue() {
    list.textContent = "";
    var ids = Object.keys(sessions);
    empty.hidden = ids.length > 0;
    ids.sort(function (a, b) { return String(sessions[a].handoff_at).localeCompare(String(sessions[b].handoff_at)); });
    ids.forEach(function (id) {
      var s = sessions[id];
      var row = el("li", "mdk-row" + (id === current ? " mdk-current" : "") + (s.unread ? " mdk-unread" : ""));
      row.setAttribute("data-session-id", id);
      row.setAttribute("data-state", s.state);
      var where = s.state === "waiting_for_human" ? t("waiting", { position: s.position }) : t("with", { staff: s.assigned_to || "?" });
      row.appendChild(el("span", "", s.tenant + " · " + s.end_user_id));
      row.appendChild(el("small", "", where));
      row.appendChild(el("small", "", (s.trigger || "") + (s.reason ? ": " + s.reason : "")));
      row.addEventListener("click", function () { open(id); });
      list.appendChild(row);
    });
  }

  function open(id) {
    current = id;
    if (sessions[id]) sessions[id].unread = false;
    send({ type: "open", session_id: id });
    drawQueue();
  }

  function section(title, items) {
    noteBox.appendChild(el("h3", "", title));
    var ul = el("ul");
    if (!items.length) ul.appendChild(el("li", "", "–"));
    items.forEach(function (item) { ul.appendChild(el("li", "", item)); });
    noteBox.appendChild(ul);
  }

  function drawNote(note) {
    current = note.session_id;
    panel.hidden = false;
    panel.setAttribute("data-session-id", note.session_id);
    panel.setAttribute("data-state", note.state);
    noteBox.textContent = "";
    noteBox.appendChild(el("strong", "", note.tenant + " · " + note.end_user_id + " · " + stateName(note.state) +
      (note.position ? " (#" + note.position + ")" : "")));
    section(t("why"), [(note.trigger || "–") + (note.reason ? ": " + note.reason : "")]);
    section(t("customer"), note.anchor.map(function (a) { return a.content; }));
    section(t("summary"), note.summary ? [note.summary] : []);
    section(t("memories"), note.recalled.map(function (m) { return m.content + "  [" + m.stage + " " + m.score + "]"; }));
    var calls = [];
    if (note.tool_calls.current_tool) calls.push(note.tool_calls.current_tool + " " + JSON.stringify(note.tool_calls.tool_args));
    note.tool_calls.batches.forEach(function (b) { calls.push(b.tool + " " + b.completed + "/" + b.total + " (" + b.status + ")"); });
    section(t("tool_calls"), calls);
    log.textContent = "";
    note.messages.forEach(addMessage);
    claimButton.hidden = note.state === "with_human" && !!note.assigned_to;
    drawQueue();
  }

  function addMessage(m) {
    var who = m.role === "staff" ? (m.author || t("who_staff")) : m.role === "user" ? t("who_customer") : m.role === "assistant" ? t("who_ai") : m.role;
    var node = el("div", "mdk-msg mdk-msg-" + m.role);
    node.setAttribute("data-role", m.role);
    node.appendChild(el("small", "", who + ": "));
    node.appendChild(document.createTextNode(m.text));
    log.appendChild(node);
    log.scrollTop = log.scrollHeight;
  }

  function onFrame(f) {
    if (f.type === "queue") {
      sessions = {};
      f.sessions.forEach(function (s) { sessions[s.session_id] = s; });
      drawQueue();
    } else if (f.type === "session") {
      var s = f.session;
      if (s.state === "waiting_for_human" || s.state === "with_human") sessions[s.session_id] = s; else delete sessions[s.session_id];
      if (s.session_id === current) { panel.setAttribute("data-state", s.state); claimButton.hidden = s.state === "with_human"; }
      drawQueue();
    } else if (f.type === "message") {
      if (f.session_id === current) addMessage(f.message);
      else if (sessions[f.session_id]) { sessions[f.session_id].unread = true; drawQueue(); }
    } else if (f.type === "note" || f.type === "claimed") {
      drawNote(f.note);
    } else if (f.type === "released") {
      if (f.session_id === current) { panel.setAttribute("data-state", "ai"); }
      setStatus(t("released"));
    } else if (f.type === "typing") {
      if (f.session_id !== current) return;
      typing.hidden = false;
      clearTimeout(typingTimer);
      typingTimer = setTimeout(function () { typing.hidden = true; }, 3000);
    } else if (f.type === "error") {
      setStatus(f.code + ": " + f.message, true);
    }
  }

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(scheme + location.host + root.getAttribute("data-ws-path"));
    ws.onopen = function () {
      attempts = 0;
      setStatus(t("online"));
      clearInterval(pinger);
      pinger = setInterval(function () { send({ type: "ping" }); }, 20000);
      if (current) send({ type: "open", session_id: current });
    };
    ws.onmessage = function (event) { onFrame(JSON.parse(event.data)); };
    ws.onclose = function (event) {
      clearInterval(pinger);
      if (event.code === 4401 || event.code === 4403) { setStatus(t("not_allowed"), true); return; }
      setStatus(t("offline"), true);
      attempts += 1;
      setTimeout(connect, Math.min(10000, 500 * Math.pow(2, attempts)));
    };
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    var reply = text.value.trim();
    if (!reply || !current) return;
    send({ type: "reply", session_id: current, text: reply });
    text.value = "";
  });
  text.addEventListener("input", function () {
    var now = Date.now();
    if (current && now - lastTyping > 1500) { lastTyping = now; send({ type: "typing", session_id: current }); }
  });
  claimButton.addEventListener("click", function () { if (current) send({ type: "claim", session_id: current }); });
  releaseButton.addEventListener("click", function () { if (current) send({ type: "release", session_id: current }); });
  connect();
})();
