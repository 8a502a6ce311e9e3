// The attention explorer: one text, translated by one or more served models side by side, each with its n-best
// list and an SVG heatmap of the attention (target subwords × source subwords). Each cell carries its weight in
// data-w, exactly as /v1/translate returned it (the mean of heads is computed here, to 5 decimals).
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const MAX_PANELS = 4;
const state = { models: [], panels: [] };

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

// Colour scale: white → blue → dark indigo, for weights in [0, 1].
const STOPS = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107], [20, 10, 60]];

function colour(w) {
  const x = Math.min(Math.max(w, 0), 1) * (STOPS.length - 1);
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

function addPanel(modelName) {
  if (state.panels.length >= MAX_PANELS) return;
  const node = $("#panel-template").content.firstElementChild.cloneNode(true);
  const panel = { node, result: null, line: 0, hypothesis: 0 };
  const select = $(".model", node);
  for (const model of state.models) {
    select.append(el("option", { value: model.name }, `${model.name} (${model.source}→${model.target})`));
  }
  select.value = modelName;
  select.addEventListener("change", () => { showMeta(panel); translatePanel(panel); });
  $(".remove", node).addEventListener("click", () => {
    state.panels.splice(state.panels.indexOf(panel), 1);
    node.remove();
    updateButtons();
  });
  for (const picker of [".layer", ".head"]) $(picker, node).addEventListener("change", () => draw(panel));
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
  const body = { q: text, model: $(".model", panel.node).value, attention: true,
                 nbest: Number($("#nbest").value) || 1 };
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
    message.textContent = error.message;
    message.className = "message error";
    $(".result", panel.node).hidden = true;
  }
}

function showLines(panel) {
  const picker = $(".line-picker", panel.node);
  picker.replaceChildren();
  const lines = panel.result.lines;
  if (lines.length > 1) {
    lines.forEach((line, i) => {
      const button = el("button", { type: "button", class: i === panel.line ? "chosen" : "" }, `line ${i + 1}`);
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
  draw(panel);
}

function fillPickers(panel) {
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
  layer.disabled = layers === 1;
  head.disabled = heads === 1;
}

function weightsShown(panel) {  // (tgt, src) for the chosen line, hypothesis, layer and head
  const hyp = panel.result.lines[panel.line].hypotheses[panel.hypothesis];
  const layer = hyp.attention[Number($(".layer", panel.node).value)];
  const head = $(".head", panel.node).value;
  return head === "mean" ? (layer.length === 1 ? layer[0] : meanOfHeads(layer)) : layer[Number(head)];
}

function draw(panel) {
  const svg = $(".heatmap", panel.node);
  svg.replaceChildren();
  const line = panel.result.lines[panel.line];
  const hyp = line.hypotheses[panel.hypothesis];
  if (!hyp.attention) {
    svg.setAttribute("width", 0);
    svg.setAttribute("height", 0);
    return;
  }
  const weights = weightsShown(panel), src = line.source_pieces, tgt = hyp.target_pieces;
  const left = labelWidth(tgt), top = labelWidth(src) * 0.75 + 12;
  const room = $(".heatmap-frame", panel.node).clientWidth - left - 12;  // cells fit the panel if they can
  const cell = Math.max(16, Math.min(34, Math.floor(room / Math.max(src.length, 1))));
  svg.setAttribute("width", left + cell * src.length + 8);
  svg.setAttribute("height", top + cell * tgt.length + 8);
  svg.setAttribute("data-rows", tgt.length);
  svg.setAttribute("data-cols", src.length);
  const labels = { rows: [], cols: [] }, cells = [];
  src.forEach((piece, s) => {
    const x = left + s * cell + cell / 2;
    const label = el("svg:text", { class: "col-label", x: 0, y: 0, "data-col": s,
                                   transform: `translate(${x + 4},${top - 6}) rotate(-50)` }, show(piece));
    labels.cols.push(label);
    svg.append(label);
  });
  tgt.forEach((piece, t) => {
    const label = el("svg:text", { class: "row-label", x: left - 6, y: top + t * cell + cell / 2 + 4,
                                   "data-row": t }, show(piece));
    labels.rows.push(label);
    svg.append(label);
    src.forEach((_, s) => {
      const w = weights[t][s];
      const rect = el("svg:rect", { class: "cell", x: left + s * cell, y: top + t * cell, width: cell - 1,
                                    height: cell - 1, fill: colour(w), "data-row": t, "data-col": s, "data-w": w });
      rect.append(el("svg:title", {}, `${show(piece)} → ${show(src[s])}: ${w.toFixed(3)}`));
      cells.push(rect);
      svg.append(rect);
    });
  });
  connectHover(svg, labels, cells, weights);
}

function show(piece) {  // sentencepiece marks a word start with ▁; the label shows it as a thin space
  return piece.replace(/^▁/, "·");
}

function labelWidth(pieces) {
  const longest = Math.max(1, ...pieces.map((p) => p.length));
  return Math.min(160, 14 + longest * 7.5);
}

function connectHover(svg, labels, cells, weights) {
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
  svg.addEventListener("mouseleave", clear);
}

async function start() {
  try {
    state.models = (await api("/v1/models")).models;
  } catch (error) {
    $("#status").textContent = `cannot list the models: ${error.message}`;
    return;
  }
  const first = state.models.find((m) => m.default) || state.models[0];
  $("#status").textContent = `${state.models.length} model(s) served`;
  const samePair = state.models.filter((m) => m.source === first.source && m.target === first.target);
  const shown = samePair.filter((m) => m.type !== "ensemble").slice(0, 3);
  for (const model of shown.length ? shown : [first]) addPanel(model.name);
  $("#text").placeholder = `a sentence in ${first.source}`;
  $("#ask").addEventListener("submit", (event) => {
    event.preventDefault();
    for (const panel of state.panels) translatePanel(panel);
  });
  $("#text").addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) $("#ask").requestSubmit();
  });
  $("#add").addEventListener("click", () => {
    const used = new Set(state.panels.map((p) => $(".model", p.node).value));
    const next = state.models.find((m) => !used.has(m.name)) || state.models[0];
    const panel = addPanel(next.name);
    if (panel && $("#text").value.trim()) translatePanel(panel);
  });
}

document.addEventListener("DOMContentLoaded", start);
