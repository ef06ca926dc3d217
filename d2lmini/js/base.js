  /* ---- d2lmini/js/base.js: what the other parts use ------------------
   * DOM and SVG elements, the extent of arrays of numbers, numbers as
   * text and values as error messages name them. */

  const SVG_NS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, parent, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  function svg(tag, attrs, parent, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    if (parent) parent.appendChild(node);
    return node;
  }

  /** [smallest, largest] of the numbers of one or more arrays, by a
   * loop: spreading an array into Math.min passes each number as an
   * argument and throws "Maximum call stack size exceeded" for large
   * arrays.  [Infinity,
   * -Infinity] when they are empty. */
  function extent(...arrays) {
    let lo = Infinity, hi = -Infinity;
    for (const xs of arrays) {
      for (const x of xs) {
        if (x < lo) lo = x;
        if (x > hi) hi = x;
      }
    }
    return [lo, hi];
  }

  const maxOf = (...arrays) => extent(...arrays)[1];

  const fmt = (x, digits) => (Number.isFinite(x) ? x.toFixed(digits) : String(x));

  /** A value as an error message names it: a string quoted (the string
   * "3" is not the number 3), an array or object as JSON, anything else
   * as String() writes it (NaN, Infinity, undefined). */
  function shown(x) {
    if (typeof x !== "string" && (x === null || typeof x !== "object")) return String(x);
    try {
      return JSON.stringify(x);
    } catch (err) {  // a cycle
      return String(x);
    }
  }
