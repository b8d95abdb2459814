// The review page's correction form: one typed input per field of the item (from the item view's
// "form"), the failing field focused with its text selected, so a one-field correction is the key
// that opens the form, the new value and Enter. Values are read back typed: a number field sends a
// number when the text is one (the server coerces or refuses anything else, naming the field), a
// choice its option, text as typed. Only the fields that changed travel. Everything is rendered
// with textContent / value: data never becomes markup.
"use strict";

window.ConveyorForm = (function () {
  const NUMERIC = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;

  function shown(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "object" ? JSON.stringify(value) : String(value);
  }

  function input(field) {
    let node;
    if (field.kind === "choice") {
      node = document.createElement("select");
      const known = field.choices.indexOf(shown(field.value)) >= 0;
      for (const choice of (known || field.value === null || field.value === undefined ? [] : [shown(field.value)]).concat(field.choices)) {
        const option = document.createElement("option");
        option.value = choice;
        option.textContent = choice.replace(/_/g, " ");
        node.appendChild(option);
      }
      node.value = shown(field.value);
    } else if (field.kind === "long") {
      node = document.createElement("textarea");
      node.rows = 3;
      node.value = shown(field.value);
    } else {
      node = document.createElement("input");
      node.type = "text";
      if (field.kind === "number" || field.kind === "integer") node.inputMode = field.kind === "integer" ? "numeric" : "decimal";
      node.value = shown(field.value);
      node.maxLength = 4000;
    }
    node.id = "field-" + field.name;
    node.name = field.name;
    node.dataset.kind = field.kind;
    node.spellcheck = false;
    if (field.failing) node.classList.add("failing");
    return node;
  }

  // Build the form into `box`; returns the input to focus (the first failing field, else the first).
  function build(box, fields) {
    box.replaceChildren();
    let focus = null;
    for (const field of fields) {
      const row = document.createElement("div");
      row.className = "form-row" + (field.failing ? " failing" : "");
      const label = document.createElement("label");
      label.htmlFor = "field-" + field.name;
      label.textContent = field.name.replace(/_/g, " ");
      const node = input(field);
      row.append(label, node);
      if (field.hint && field.kind !== "long") node.title = field.hint;
      if (field.kind === "date" && field.hint) node.placeholder = field.hint.replace(/^a date in the form /, "");
      box.appendChild(row);
      if (!focus && field.failing) focus = node;
    }
    return focus || box.querySelector("input, select, textarea");
  }

  function typed(node, before) {
    const text = node.value;
    if (node.dataset.kind === "number" || node.dataset.kind === "integer") {
      const bare = text.trim();
      if (bare === "") return before === null || before === undefined || before === "" ? before : null;
      return NUMERIC.test(bare) ? Number(bare) : text;
    }
    if (node.dataset.kind === "json") {
      if (text.trim() === "") return null;
      try { return JSON.parse(text); } catch (e) { return text; }  // the server names the field
    }
    if ((before === null || before === undefined) && text === "") return before;
    return text;
  }

  // The changed fields, typed: {name: value}.
  function changes(box, fields) {
    const out = {};
    for (const field of fields) {
      const node = box.querySelector("#" + CSS.escape("field-" + field.name));
      if (!node) continue;
      const value = typed(node, field.value);
      if (JSON.stringify(value) !== JSON.stringify(field.value === undefined ? null : field.value)
          && !(value === undefined && field.value === null)) out[field.name] = value === undefined ? null : value;
    }
    return out;
  }

  return { build: build, changes: changes };
})();
