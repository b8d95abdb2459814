// What every part of the review page uses: DOM nodes built with textContent (data never becomes
// markup), the review API's client (errors carry the status and the server's detail; a 401 says
// the Airflow session ended), and values formatted as a reviewer reads them.
"use strict";

window.ConveyorKit = (function () {
  const API = "../api/review/";
  const $ = (id) => document.getElementById(id);

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }
  const clear = (node) => node.replaceChildren();

  class ApiError extends Error {
    constructor(status, detail) {
      super(typeof detail === "string" ? detail : (detail && detail.message) || JSON.stringify(detail));
      this.status = status;
      this.detail = detail;
    }
  }

  async function api(path, options) {
    const init = Object.assign({ credentials: "same-origin", headers: { Accept: "application/json" } }, options || {});
    const response = await fetch(API + path, init);
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      if (response.status === 401) throw new ApiError(401, "Your Airflow session has ended: log in to Airflow again.");
      throw new ApiError(response.status, body && body.detail !== undefined ? body.detail : response.statusText);
    }
    return body;
  }
  const post = (path, body, method) => api(path, {
    method: method || "POST",
    headers: { Accept: "application/json", "Content-Type": "application/json" },
    body: JSON.stringify(body || {}),
  });
  const itemPath = (id) => "items/" + encodeURIComponent(id);

  // -- formatting -----------------------------------------------------------------------------

  function formatAge(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
    if (d) return d + "d " + h + "h";
    if (h) return h + "h " + m + "m";
    if (m) return m + "m";
    return s + "s";
  }
  function formatTime(iso) {
    if (!iso) return "";
    const t = new Date(iso);
    return isNaN(t.getTime()) ? String(iso) : t.toLocaleString();
  }
  const shortTime = (iso) => new Date(iso).toLocaleString([], { month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit" });
  const clock = (iso) => new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  const formatJson = (v) => (v === null || v === undefined ? "(none)" : JSON.stringify(v, null, 2));
  const NUMBER = new Intl.NumberFormat(undefined, { maximumFractionDigits: 2 });
  const AMOUNT = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });

  // One card value as a reviewer reads it, by the kind its workflow declared.
  function cardValue(field) {
    const v = field.value;
    if (v === null || v === undefined || v === "") return el("span", "–", "muted");
    const num = typeof v === "number" ? v : Number(v);
    switch (field.kind) {
      case "amount": return el("span", isNaN(num) ? String(v) : AMOUNT.format(num));
      case "number": return el("span", isNaN(num) ? String(v) : NUMBER.format(num));
      case "percent": return el("span", isNaN(num) ? String(v) : Math.round(num * 100) + "%");
      case "date": { const t = new Date(v); return el("span", isNaN(t.getTime()) ? String(v) : t.toLocaleDateString()); }
      case "label": return el("span", String(v), "label-chip");
      default: return el("span", typeof v === "object" ? JSON.stringify(v) : String(v));
    }
  }
  // Statuses as a reviewer reads them (the ledger's names are for the code and the CLI); a
  // workflow's own statuses read as their words.
  const STATUS_WORDS = {
    quarantined: "held by the input checks", pending_review: "waiting for a person", corrected: "corrected, to be checked again",
    received: "received", validated: "checked, going on to the next step", ai_processed: "answered by the AI step",
    approved: "approved", published: "published", rejected: "rejected", failed: "failed", cancelled: "cancelled",
  };
  const statusWords = (s) => STATUS_WORDS[s] || String(s).replace(/_/g, " ");
  // After a decision: the status name the CLI and the history use (to look it up), in words too.
  const statusOf = (s) => (statusWords(s) === s ? s : s + " (" + statusWords(s) + ")");
  const statusNode = (s, named) => {
    const node = el("span", named ? statusOf(s) : statusWords(s), "status status-" + String(s).replace(/[^a-z_]/g, ""));
    node.title = String(s);
    return node;
  };
  // A check's message without the validation library's rule name (expect_column_values_to_...: ).
  const plain = (text) => String(text || "").replace(/\bexpect_[a-z0-9_]+:\s*/g, "").trim();
  const claimText = (c) => (c.mine ? "you are reviewing it" : "being reviewed by " + c.reviewer);

  return {
    $, el, clear, ApiError, api, post, itemPath, formatAge, formatTime, shortTime, clock, formatJson,
    cardValue, statusWords, statusOf, statusNode, plain, claimText,
  };
})();
