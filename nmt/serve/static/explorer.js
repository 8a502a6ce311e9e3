// The attention explorer: one text, translated by one or more served models side by side, each with its n-best
// list and an SVG heatmap of the attention (output subwords × source subwords). Each cell carries its weight in
// data-w, exactly as /v1/translate returned it (the mean of heads is computed here, to 5 decimals). The word
// alignment /v1/translate returns is drawn over it: each link outlines the cells of its two words' subwords.
// A heatmap fits its panel where cells of MIN_CELL pixels do; else the panels stack, one to a row, and a
// heatmap still too wide scrolls inside its frame, with its row labels kept in view and a line saying so.
// Cells are as large as the panel's width and the window's height allow (up to MAX_CELL), so that a heatmap
// is seen whole where it can be.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_PANELS = 4;
const MIN_CELL = 16;  // pixels: column labels, set upright, are about 14 pixels thick
const MAX_CELL = 34;
const GAP = 8;  // pixels between labels and cells, and around the heatmap
const LINE = 16;  // pixels: a line of the axis titles
const state = { models: [], panels: [], size: "" };

// What the text box shows before anything is typed: one sentence in the served source language.
const PLACEHOLDERS = {
  de: "Zwei junge Männer spielen auf einer Wiese Fußball.",
  en: "Two young men are playing football on a meadow.",
  fr: "Deux jeunes hommes jouent au football dans un pré.",
  cs: "Dva mladí muži hrají fotbal na louce.",
};

function placeholderFor(language) {  // 'de', 'de-AT', 'de_DE' → German; a language without one → English
  return PLACEHOLDERS[String(language).toLowerCase().split(/[-_]/)[0]] || PLACEHOLDERS.en;
}

const $ = (selector, root = document) => root.querySelector(selector);

function el(tag, attributes = {}, text = "") {
  const node = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text) node.textContent = text;
  return node;
}

async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
  };
  const response = await fetch(path, options);
  const answer = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(answer.error || `HTTP ${response.status}`);
  return answer;
}

// Colour scale: white → blue → dark indigo, from 0 to `top` (the largest weight shown, or 1). plot-attention's
// images use the same stops (nmt/evaluate/plots.py ATTENTION_STOPS; a test keeps the two equal).
const STOPS = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [20, 10, 60]];

function colour(w, top) {
  const x = Math.min(Math.max(w / top, 0), 1) * (STOPS.length - 1);
  const i = Math.min(Math.floor(x), STOPS.length - 2);
  const f = x - i;
  const rgb = STOPS[i].map((c, k) => Math.round(c + f * (STOPS[i + 1][k] - c)));
  return `rgb(${rgb.join(",")})`;
}

function meanOfHeads(layer) {  // (heads, tgt, src) → (tgt, src)
  return layer[0].map((row, t) => row.map((_, s) => {
    const sum = layer.reduce((total, head) => total + head[t][s], 0);
    return Math.round((sum / layer.length) * 1e5) / 1e5;
  }));
}

function describe(model) {
  const bleu = model.test_bleu ? ` · test BLEU ${model.test_bleu.bleu.toFixed(1)}` : "";
  const size = model.parameters ? ` · ${(model.parameters / 1e6).toFixed(1)}M` : "";
  return `${model.type}${size}${bleu}`;
}

function directionsOf(name) {  // a model's entries of /v1/models: one per direction it translates
  return state.models.filter((m) => m.name === name);
}

function modelNames() {  // each served model once, in the order /v1/models lists them
  return [...new Set(state.models.map((m) => m.name))];
}

function fillDirections(panel) {  // a model of several directions (a multilingual one): choose the direction
  const picker = $(".direction", panel.node), directions = directionsOf($(".model", panel.node).value);
  const keep = picker.value;
  picker.replaceChildren(...directions.map((m) => el("option", { value: `${m.source} ${m.target}` },
                                                        `${m.source} → ${m.target}`)));
  if (directions.some((m) => `${m.source} ${m.target}` === keep)) picker.value = keep;
  picker.closest(".picker").hidden = directions.length < 2;
}

function addPanel(modelName) {
  if (state.panels.length >= MAX_PANELS) return;
  const node = $("#panel-template").content.firstElementChild.cloneNode(true);
  const panel = { node, result: null, line: 0, hypothesis: 0 };
  const select = $(".model", node);
  for (const name of modelNames()) {
    const directions = directionsOf(name);
    const pair = directions.length === 1 ? `${directions[0].source}→${directions[0].target}`
      : `${directions.length} directions`;
    select.append(el("option", { value: name }, `${name} (${pair})`));
  }
  select.value = modelName;
  fillDirections(panel);
  select.addEventListener("change", () => { fillDirections(panel); showMeta(panel); translatePanel(panel); });
  $(".direction", node).addEventListener("change", () => translatePanel(panel));
  $(".remove", node).addEventListener("click", () => {
    state.panels.splice(state.panels.indexOf(panel), 1);
    node.remove();
    updateButtons();
    layOut();
  });
  for (const picker of [".layer", ".head", ".scale", ".links"]) $(picker, node).addEventListener("change", layOut);
  $(".bar", node).style.background = `linear-gradient(to right, ${STOPS.map((c) => `rgb(${c})`).join(", ")})`;
  $(".heatmap-frame", node).addEventListener("scroll", () => showScroll(panel));
  $("#panels").append(node);
  state.panels.push(panel);
  showMeta(panel);
  updateButtons();
  return panel;
}

function showMeta(panel) {
  const model = state.models.find((m) => m.name === $(".model", panel.node).value);
  $(".meta", panel.node).textContent = model ? describe(model) : "";
}

function updateButtons() {
  $("#add").disabled = state.panels.length >= MAX_PANELS;
  for (const panel of state.panels) $(".remove", panel.node).hidden = state.panels.length === 1;
}

async function translatePanel(panel) {
  const text = $("#text").value;
  if (!text.trim()) return;
  const message = $(".message", panel.node);
  message.textContent = "translating…";
  message.className = "message";
  const body = { q: text, model: $(".model", panel.node).value, attention: true, alignments: true,
                 nbest: Number($("#nbest").value) || 1 };
  if (directionsOf(body.model).length > 1) [body.source, body.target] = $(".direction", panel.node).value.split(" ");
  if (Number($("#beam").value) > 0) body.beam_size = Number($("#beam").value);
  try {
    const answer = await api("/v1/translate", body);
    panel.result = answer.translations[0];
    panel.line = Math.min(panel.line, panel.result.lines.length - 1);
    panel.hypothesis = 0;
    message.textContent = "";
    $(".result", panel.node).hidden = false;
    showLines(panel);
  } catch (error) {
    panel.result = null;
    message.textContent = error.message;
    message.className = "message error";
    $(".result", panel.node).hidden = true;
    layOut();
  }
}

function showLines(panel) {
  const picker = $(".line-picker", panel.node);
  picker.replaceChildren();
  const lines = panel.result.lines;
  if (lines.length > 1) {
    lines.forEach((line, i) => {
      const button = el("button", { type: "button", class: i === panel.line ? "chosen" : "" }, `sentence ${i + 1}`);
      button.addEventListener("click", () => { panel.line = i; panel.hypothesis = 0; showLines(panel); });
      picker.append(button);
    });
  }
  showHypotheses(panel);
}

function showHypotheses(panel) {
  const list = $(".nbest", panel.node);
  list.replaceChildren();
  const line = panel.result.lines[panel.line];
  line.hypotheses.forEach((hyp, i) => {
    const item = el("li", { class: i === panel.hypothesis ? "chosen" : "", tabindex: "0" });
    item.append(el("span", { class: "text" }, hyp.text || "(empty)"), el("span", { class: "score" }, hyp.score.toFixed(3)));
    const choose = () => { panel.hypothesis = i; showHypotheses(panel); };
    item.addEventListener("click", choose);
    item.addEventListener("keydown", (event) => { if (event.key === "Enter") choose(); });
    list.append(item);
  });
  fillPickers(panel);
  layOut();
}

function fillPickers(panel) {  // a model with one layer or one head (an RNN) shows no picker for it
  const hyp = panel.result.lines[panel.line].hypotheses[panel.hypothesis];
  const layer = $(".layer", panel.node), head = $(".head", panel.node);
  const view = $(".view", panel.node);
  view.hidden = !hyp.attention;
  if (!hyp.attention) return;
  const layers = hyp.attention.length, heads = hyp.attention[0].length;
  const keepLayer = layer.value, keepHead = head.value;
  layer.replaceChildren(...[...Array(layers).keys()].map((i) => el("option", { value: i }, String(i))));
  head.replaceChildren(el("option", { value: "mean" }, "mean"),
                       ...[...Array(heads).keys()].map((i) => el("option", { value: i }, String(i))));
  layer.value = keepLayer !== "" && keepLayer < layers ? keepLayer : layers - 1;  // default: the last layer
  head.value = keepHead !== "" && (keepHead === "mean" || keepHead < heads) ? keepHead : "mean";
  layer.closest(".picker").hidden = layers === 1;
  head.closest(".picker").hidden = heads === 1;
  $(".links-toggle", panel.node).hidden = !hyp.alignment;
}

function weightsShown(panel) {  // (tgt, src) for the chosen line, hypothesis, layer and head
  const hyp = panel.result.lines[panel.line].hypotheses[panel.hypothesis];
  const layer = hyp.attention[Number($(".layer", panel.node).value)];
  const head = $(".head", panel.node).value;
  return head === "mean" ? (layer.length === 1 ? layer[0] : meanOfHeads(layer)) : layer[Number(head)];
}

function hasHeatmap(panel) {
  return panel.result !== null && Boolean(panel.result.lines[panel.line].hypotheses[panel.hypothesis].attention);
}

function layOut() {  // draw every heatmap: side by side where each fits its panel, else one panel to a row
  const drawn = state.panels.filter(hasHeatmap);
  for (const panel of state.panels) if (!hasHeatmap(panel)) clear(panel);
  const panels = $("#panels");
  panels.classList.remove("stacked");
  for (const panel of drawn) draw(panel);
  if (drawn.some((panel) => !panel.fits)) {
    panels.classList.add("stacked");
    for (const panel of drawn) draw(panel);
  }
}

function clear(panel) {
  for (const svg of panel.node.querySelectorAll("svg")) {
    svg.replaceChildren();
    svg.setAttribute("width", 0);
    svg.setAttribute("height", 0);
  }
  $(".scroll-hint", panel.node).hidden = true;
}

function draw(panel) {
  clear(panel);
  const line = panel.result.lines[panel.line];
  const hyp = line.hypotheses[panel.hypothesis];
  const weights = weightsShown(panel), src = line.source_pieces, tgt = hyp.target_pieces;
  const axis = $(".row-axis", panel.node), svg = $(".heatmap", panel.node), frame = $(".heatmap-frame", panel.node);
  const labels = {
    cols: src.map((piece, s) => svg.appendChild(el("svg:text", { class: "col-label", "data-col": s }, show(piece)))),
    rows: tgt.map((piece, t) => axis.appendChild(el("svg:text", { class: "row-label", "data-row": t }, show(piece)))),
  };
  const titles = ["source →", "output ↓"].map((text) => axis.appendChild(el("svg:text", { class: "axis-title" }, text)));
  const longest = (texts) => Math.max(0, ...texts.map((text) => text.getComputedTextLength()));
  const left = Math.ceil(Math.max(longest(labels.rows), longest(titles))) + 2 * GAP;
  const top = Math.ceil(Math.max(longest(labels.cols), titles.length * LINE)) + GAP;
  const room = frame.clientWidth - left - GAP;
  const roomHigh = window.innerHeight - top - 6 * LINE;  // the colour legend above, the scroll line below
  panel.fits = room >= MIN_CELL * src.length;
  const cell = Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(room / Math.max(src.length, 1)),
                                           Math.floor(roomHigh / Math.max(tgt.length, 1))));
  const height = top + cell * tgt.length + GAP;
  size(axis, left, height);
  size(svg, cell * src.length + GAP, height);
  svg.setAttribute("data-rows", tgt.length);
  svg.setAttribute("data-cols", src.length);
  titles.forEach((title, i) => {  // in the corner: "source →" beside the column labels, "output ↓" above the rows
    title.setAttribute("x", left - GAP);
    title.setAttribute("y", top - GAP + 2 - LINE * (titles.length - 1 - i));
  });
  labels.cols.forEach((label, s) => {  // upright, reading upwards, centred on its column
    label.setAttribute("transform", `translate(${s * cell + cell / 2 + 4},${top - GAP / 2}) rotate(-90)`);
  });
  labels.rows.forEach((label, t) => {
    label.setAttribute("x", left - GAP);
    label.setAttribute("y", top + t * cell + cell / 2 + 4);
  });
  const scaleTop = $(".scale", panel.node).value === "fixed" ? 1 : weights.flat().reduce((a, b) => Math.max(a, b), 1e-6);
  $(".legend .top", panel.node).textContent = scaleTop === 1 ? "1" : scaleTop.toFixed(2);
  const cells = [];
  tgt.forEach((piece, t) => src.forEach((_, s) => {
    const w = weights[t][s];
    const rect = el("svg:rect", { class: "cell", x: s * cell, y: top + t * cell, width: cell - 1, height: cell - 1,
                                  fill: colour(w, scaleTop), "data-row": t, "data-col": s, "data-w": w });
    rect.append(el("svg:title", {}, `${show(piece)} → ${show(src[s])}: ${w.toFixed(3)}`));
    cells.push(svg.appendChild(rect));
  }));
  if (hyp.alignment && $(".links", panel.node).checked) {
    drawLinks(svg, hyp.alignment, sourceWords(src), outputWords(tgt), cell, top);
  }
  panel.cell = cell;
  panel.columns = src.length;
  connectHover(frame, labels, cells, weights);
  showScroll(panel);
}

// The word of each subword, as the server counts words (nmt/data/words.py): a source piece with ▁ starts a
// word, and so does the first; control pieces (</s>, language tags) belong to none. An output piece belongs to
// the word of its first visible character in the decoded text, a lone ▁ to the word after it; an unknown
// piece decodes to " ⁇ ", a word of its own.
function isControl(piece) {
  return ["</s>", "<s>", "<pad>"].includes(piece) || /^>>.+<<$/.test(piece);
}

function sourceWords(pieces) {
  let word = -1;
  return pieces.map((piece) => {
    if (isControl(piece)) return null;
    if (word < 0 || piece.startsWith("▁")) word += 1;
    return word;
  });
}

function outputWords(pieces) {
  const found = [];
  let word = -1, inside = false, waiting = 0;
  for (const piece of pieces) {
    const surface = piece === "<unk>" ? " ⁇ " : isControl(piece) ? "" : piece.replaceAll("▁", " ");
    let first = null;
    for (const char of surface) {
      if (/\s/.test(char)) inside = false;
      else if (!inside) { word += 1; inside = true; if (first === null) first = word; }
      else if (first === null) first = word;
    }
    if (first === null) { waiting += 1; continue; }
    for (let k = 0; k <= waiting; k++) found.push(first);
    waiting = 0;
  }
  return found.concat(Array(waiting).fill(null));
}

function drawLinks(svg, links, srcWords, tgtWords, cell, top) {  // an outline around each linked word pair
  const span = (words, word) => {
    const at = words.flatMap((w, k) => (w === word ? [k] : []));
    return at.length ? [at[0], at[at.length - 1]] : null;
  };
  for (const [i, j] of links) {
    const cols = span(srcWords, i), rows = span(tgtWords, j);
    if (!cols || !rows) continue;
    svg.appendChild(el("svg:rect", {
      class: "link", "data-src": i, "data-tgt": j, x: cols[0] * cell + 1, y: top + rows[0] * cell + 1,
      width: (cols[1] - cols[0] + 1) * cell - 3, height: (rows[1] - rows[0] + 1) * cell - 3,
    }));
  }
}

function size(svg, width, height) {
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
}

function showScroll(panel) {  // a heatmap wider than its frame: which columns are in view, and which way to go
  const frame = $(".heatmap-frame", panel.node), hint = $(".scroll-hint", panel.node);
  const box = $(".heatmap-box", panel.node);
  const hidden = frame.scrollWidth - frame.clientWidth;
  const before = frame.scrollLeft > 1, after = frame.scrollLeft < hidden - 1;
  box.classList.toggle("more-before", hidden > 0 && before);
  box.classList.toggle("more-after", hidden > 0 && after);
  const axis = $(".row-axis", panel.node).getBoundingClientRect().width;  // the row labels, kept in view
  box.style.setProperty("--axis-width", `${axis}px`);
  hint.hidden = hidden <= 0;
  if (hidden <= 0) return;
  const seen = frame.clientWidth - axis;
  const first = Math.floor(frame.scrollLeft / panel.cell) + 1;
  const last = Math.min(panel.columns, Math.floor((frame.scrollLeft + seen) / panel.cell));
  const way = before && after ? "← scroll →" : before ? "← scroll" : "scroll →";
  hint.textContent = `source columns ${first}–${last} of ${panel.columns} in view · ${way}`;
}

function show(piece) {  // sentencepiece marks a word start with ▁; the label shows it as a middle dot
  return piece.replace(/^▁/, "·");
}

function connectHover(frame, labels, cells, weights) {
  const clear = () => {
    for (const label of [...labels.rows, ...labels.cols]) { label.style.fill = ""; label.classList.remove("lit", "focus"); }
    for (const rect of cells) rect.classList.remove("dim");
  };
  const light = (label, w) => {  // a label's ink darkens with the weight, its weight is bold above 0.1
    label.style.fill = `rgba(8, 48, 107, ${0.25 + 0.75 * Math.min(1, w * 1.5)})`;
    if (w >= 0.1) label.classList.add("lit");
  };
  const fromRow = (t) => {
    clear();
    labels.rows[t].classList.add("focus");
    labels.cols.forEach((label, s) => light(label, weights[t][s]));
    for (const rect of cells) if (Number(rect.dataset.row) !== t) rect.classList.add("dim");
  };
  const fromCol = (s) => {
    clear();
    labels.cols[s].classList.add("focus");
    labels.rows.forEach((label, t) => light(label, weights[t][s]));
    for (const rect of cells) if (Number(rect.dataset.col) !== s) rect.classList.add("dim");
  };
  labels.rows.forEach((label, t) => label.addEventListener("mouseenter", () => fromRow(t)));
  labels.cols.forEach((label, s) => label.addEventListener("mouseenter", () => fromCol(s)));
  for (const rect of cells) rect.addEventListener("mouseenter", () => fromRow(Number(rect.dataset.row)));
  frame.onmouseleave = clear;
}

async function start() {
  try {
    state.models = (await api("/v1/models")).models;
  } catch (error) {
    $("#status").textContent = `cannot list the models: ${error.message}`;
    return;
  }
  const first = state.models.find((m) => m.default) || state.models[0];
  $("#status").textContent = `${modelNames().length} model(s) served`;
  const samePair = state.models.filter((m) => m.source === first.source && m.target === first.target);
  const shown = samePair.filter((m) => m.type !== "ensemble").slice(0, 3);
  for (const model of shown.length ? shown : [first]) addPanel(model.name);
  for (const panel of state.panels) $(".direction", panel.node).value = `${first.source} ${first.target}`;
  $("#text").placeholder = placeholderFor(first.source);
  $("#ask").addEventListener("submit", (event) => {
    event.preventDefault();
    for (const panel of state.panels) translatePanel(panel);
  });
  $("#text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("#ask").requestSubmit();
  });
  $("#add").addEventListener("click", () => {
    const used = new Set(state.panels.map((p) => $(".model", p.node).value));
    const next = modelNames().find((name) => !used.has(name)) || modelNames()[0];
    const panel = addPanel(next);
    if (panel && $("#text").value.trim()) translatePanel(panel);
  });
  const redrawIfResized = () => {  // a window resized, a scroll bar come or gone: the heatmaps are drawn again
    const size = `${$("#panels").clientWidth}×${window.innerHeight}`;
    if (size === state.size) return;
    state.size = size;
    requestAnimationFrame(layOut);
  };
  new ResizeObserver(redrawIfResized).observe($("#panels"));
  window.addEventListener("resize", redrawIfResized);
}

document.addEventListener("DOMContentLoaded", start);
