// The review page's reason dialog: a rejection (or an effect done elsewhere) asks why, offering
// this browser's recent reasons by number (r, 1, Enter), newest first, kept in localStorage.
"use strict";

window.ConveyorReasons = (function () {
  const { $, el, clear } = window.ConveyorKit;

  // Recent reject reasons (this browser's, newest first) are offered by number: r, 1, Enter.
  const REASONS_KEY = "conveyor-review-reasons";
  function recentReasons() {
    try { return JSON.parse(window.localStorage.getItem(REASONS_KEY) || "[]").filter((r) => typeof r === "string"); } catch (e) { return []; }
  }
  function rememberReason(text) {
    const reason = (text || "").trim();
    if (!reason) return;
    const kept = [reason].concat(recentReasons().filter((r) => r !== reason)).slice(0, 9);
    try { window.localStorage.setItem(REASONS_KEY, JSON.stringify(kept)); } catch (e) { /* private mode: no memory */ }
  }

  let reasonThen = null;
  let reasonsOffered = [];
  function askReason(title, then, options) {
    const opts = options || {};
    reasonThen = then;
    $("reason-title").textContent = title;
    $("reason-text").value = opts.reference ? "" : $("comment").value;
    $("reason-text").placeholder = opts.reference ? "where it was done: a payment id, a ticket" : "the reason (recorded in the history)";
    $("reason-ok").textContent = opts.ok || "Reject";
    $("reason-ok").className = opts.reference ? "correct" : "reject";
    reasonsOffered = opts.reference ? [] : recentReasons();
    const list = $("recent-reasons");
    clear(list);
    for (const reason of reasonsOffered) list.appendChild(el("li", reason));
    list.hidden = !reasonsOffered.length;
    $("reason-hint").hidden = Boolean(opts.reference);
    $("reason-dialog").showModal();
    $("reason-text").focus();
  }
  function confirmReason() {
    const text = $("reason-text").value.trim();
    if (!text) { $("reason-text").focus(); return; }
    const then = reasonThen;
    reasonThen = null;
    $("reason-dialog").close();
    if (then) then(text);
  }

  function wire() {
    $("reason-form").addEventListener("submit", (e) => { e.preventDefault(); confirmReason(); });
    $("reason-text").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); confirmReason(); return; }
      // A digit in an empty reason picks that recent reason (typed after other text, it is text).
      const n = Number(e.key);
      if (/^[1-9]$/.test(e.key) && !$("reason-text").value.trim() && reasonsOffered[n - 1]) {
        e.preventDefault();
        $("reason-text").value = reasonsOffered[n - 1];
      }
    });
    $("reason-cancel").addEventListener("click", () => { reasonThen = null; $("reason-dialog").close(); });
  }

  return { ask: askReason, remember: rememberReason, wire };
})();
