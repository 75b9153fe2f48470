// Small DOM helpers shared by the example pages (no framework).
import { FuselmError } from "../../dist/index.js";

export const $ = (id) => document.getElementById(id);

export function fmtBytes(n) {
  if (n === undefined || n === null || !Number.isFinite(n)) return "?";
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toFixed(2)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toFixed(1)} MiB`;
  if (n >= 2 ** 10) return `${(n / 2 ** 10).toFixed(1)} KiB`;
  return `${n} B`;
}

export const fmtNumber = (x, digits = 1) =>
  x === undefined || x === null || !Number.isFinite(x) ? "–" : x.toLocaleString("en-US", { maximumFractionDigits: digits });

/** Fills a table's body with one row per entry; each entry is a list of cells (strings or nodes). */
export function rows(table, entries, { numericFrom = Infinity } = {}) {
  const body = table.tBodies[0] ?? table.createTBody();
  body.replaceChildren(
    ...entries.map((cells) => {
      const tr = document.createElement("tr");
      cells.forEach((c, i) => {
        const td = document.createElement("td");
        if (c instanceof Node) td.append(c);
        else td.textContent = String(c);
        if (i >= numericFrom) td.className = "num";
        tr.append(td);
      });
      return tr;
    }),
  );
}

export function chip(text, ok) {
  const span = document.createElement("span");
  span.className = `chip ${ok === undefined ? "" : ok ? "yes" : "no"}`;
  span.textContent = text;
  return span;
}

/** The stable kind of an error: a FuselmError's `kind`, else "unknown". */
export const errorKind = (e) => (e instanceof FuselmError ? e.kind : "unknown");

/** A readable one-line description: "kind: message" (the message carries a limit's numbers). */
export function errorText(e) {
  if (!(e instanceof FuselmError)) return `unexpected error: ${e?.message ?? String(e)}`;
  return `${e.kind}: ${e.message}`;
}

/** Puts the page in the "error" state and shows the error in `box` (an element with role=alert). */
export function showError(box, e, what) {
  showFailure(box, what, errorKind(e), e instanceof FuselmError ? e.message : String(e?.message ?? e));
}

/** `showError` for a failure that is no exception (an answer cut by max tokens): its kind and
 * message as given. */
export function showFailure(box, what, kind, message) {
  document.body.dataset.state = "error";
  document.body.dataset.errorKind = kind;
  const strong = document.createElement("strong");
  strong.textContent = kind;
  box.replaceChildren(`${what} failed — `, strong, `: ${message}`);
  box.hidden = false;
}

/**
 * `modelFor(url, options, onLoad)`: the model at `url`, loaded with `load` (fuselm's `loadModel`)
 * on first use and kept while the page asks again with the same URL and options (the old one is
 * disposed when they change), so a page that generates on every click loads once. `onLoad(url)`
 * is called before a load.
 */
export function modelSlot(load) {
  let loaded; // { key, model }
  return async (url, options = {}, onLoad = () => {}) => {
    const key = JSON.stringify([url, options]);
    if (loaded?.key === key) return loaded.model;
    const old = loaded?.model;
    loaded = undefined;
    await old?.dispose();
    onLoad(url);
    const model = await load(url, options);
    loaded = { key, model };
    return model;
  };
}

export function clearError(box) {
  delete document.body.dataset.errorKind;
  box.hidden = true;
  box.replaceChildren();
}

/** A file name for downloads: fuselm-<what>-<date>.json */
export function download(name, data) {
  const blob = new Blob([JSON.stringify(data, null, 2)], { type: "application/json" });
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  // The click has started the download; the URL is no longer needed after this task.
  setTimeout(() => URL.revokeObjectURL(url), 0);
}
