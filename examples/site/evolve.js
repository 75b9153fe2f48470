// The evolve page: evolution strategies train a CartPole controller live with `createSimulation`
// and `Simulation.evolve` (every generation on the GPU: perturb, one fused rollout dispatch for
// the whole population, rank, update; one submit per call), a fitness curve drawn here in SVG, and
// the current mean policy's episode (`Simulation.trace`, the CPU reference) replayed on a canvas.
// On software adapters (SwiftShader, lavapipe) the defaults shrink to a small population and short
// episodes, which still learn within half a minute.
// Query parameters: ?population=N&episodeLength=N&policy=linear|mlp&hidden=N&sigma=X
// &learningRate=X&generations=N (per GPU call)&seed=N&animate=0|1&until=N (pause after generation
// N; 0: never), and ?autorun starts at once.
// For tests and the devtools console, `window.fuselmEvolve` exposes the run (generations done,
// every generation's stats, running, error, frames drawn, …) and `document.body.dataset.state` is
// "idle" | "compiling" | "running" | "paused" | "error" (`dataset.errorKind` after an error).
// In your own site: `import { createSimulation } from "fuselm"`.
import { createSimulation, probe } from "../../dist/index.js";
import { $, chip, clearError, errorKind, fmtNumber, showError } from "./ui.js";

const params = new URLSearchParams(location.search);
const SVG = "http://www.w3.org/2000/svg";
const STEP_MS = 20; // CartPole's tau: 0.02 s per step, replayed in real time (50 steps per second)
const HOLD_MS = 800; // the last state of an episode stays on screen this long
const CURVE_POINTS = 600; // longer runs are drawn in buckets (mean of means, max of bests)
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");

let adapter; // AdapterIdentity from probe(), once known
let sim; // the compiled Simulation, from Start until Reset
let theta; // the ES mean (Float32Array)
let stats = []; // every generation's { meanReward, bestReward, bestMember }
let calls = 0; // evolve calls done
let recent = []; // the last calls' { generations, ms }, for the rate
let running = false; // the evolve loop is going
let stopRequested = false; // Pause or Reset pressed: the loop stops after the call in flight
let loop; // the running loop's promise
let lastError; // { kind, message } of the last failure
let framesDrawn = 0; // canvas frames drawn (animation frames and stills)

// ---------------------------------------------------------------- settings

function applyParams() {
  const choose = (id, value, label = value) => {
    const select = $(id);
    if (![...select.options].some((o) => o.value === value)) select.add(new Option(label, value));
    select.value = value;
  };
  if (params.has("population")) choose("population", params.get("population"));
  if (params.has("episodeLength")) choose("episode-length", params.get("episodeLength"), `${params.get("episodeLength")} steps`);
  if (params.has("policy")) $("policy").value = params.get("policy") === "mlp" ? "mlp" : "linear";
  if (params.has("sigma")) $("sigma").value = params.get("sigma");
  const lr = params.get("learningRate") ?? params.get("lr");
  if (lr !== null) $("learning-rate").value = lr;
  if (params.has("generations")) $("generations").value = params.get("generations");
  if (params.has("until")) $("until").value = params.get("until");
  if (params.has("animate")) $("animate").checked = params.get("animate") !== "0";
}

const hidden = () => Number(params.get("hidden")) || 8;

function spec() {
  return {
    env: { name: "cart-pole" },
    policy: $("policy").value === "mlp" ? { kind: "mlp", hidden: hidden() } : { kind: "linear" },
    population: Number($("population").value),
    episodeLength: Number($("episode-length").value),
    seed: Number(params.get("seed") ?? 1),
  };
}

/** The generation to pause after (Infinity: never). */
const until = () => Number($("until").value) > 0 ? Number($("until").value) : Infinity;

/** Read before every call: these may change while the run goes on. */
function callOptions() {
  const generations = Math.max(1, Math.round(Number($("generations").value) || 1));
  return {
    generations: Math.min(generations, until() - stats.length), // stop exactly at the pause
    sigma: Number($("sigma").value),
    learningRate: Number($("learning-rate").value),
    seed: Number(params.get("seed") ?? 1) * 1000 + calls, // a new seed for every call
  };
}

async function identify() {
  try {
    adapter = (await probe()).adapter;
    const name = adapter.description || [adapter.vendor, adapter.architecture].filter(Boolean).join(" ") || "unknown adapter";
    $("adapter").replaceChildren(`Adapter: ${name} (${adapter.backend}) `, chip(adapter.isSoftware ? "software" : "hardware", !adapter.isSoftware));
    if (adapter.isSoftware) {
      // WebGPU on the CPU: a small population and short episodes still learn in ~30 s.
      $("population").value = "64";
      $("episode-length").value = "200";
      $("generations").value = "5";
      $("adapter").append(" — a CPU adapter: the defaults are small (64 members, 200-step episodes, 5 generations per call).");
    }
  } catch (e) {
    // No WebGPU: say so now; Start would fail the same way.
    lastError = { kind: errorKind(e), message: e?.message ?? String(e) };
    showError($("error"), e, "Finding a WebGPU adapter");
  }
}

// ---------------------------------------------------------------- state and controls

const configInputs = ["population", "episode-length", "policy"];

function setState(state) {
  document.body.dataset.state = state;
  const compiling = state === "compiling";
  $("start").disabled = state === "running" || compiling;
  $("start").textContent = sim && stats.length > 0 ? "Resume" : "Start";
  $("pause").disabled = state !== "running" || stopRequested;
  $("reset").disabled = compiling || (!sim && stats.length === 0);
  for (const id of configInputs) $(id).disabled = compiling || sim !== undefined;
  status();
}

function status() {
  const state = document.body.dataset.state;
  const box = $("status");
  const n = stats.length;
  if (state === "compiling") {
    box.replaceChildren(Object.assign(document.createElement("span"), { className: "spinner" }), " compiling the simulation kernels…");
  } else if (state === "running") {
    box.replaceChildren(
      Object.assign(document.createElement("span"), { className: "spinner" }),
      stopRequested ? ` finishing the GPU call in flight… (${n} generations)` : ` evolving: ${n} generations, ${calls} GPU calls`,
    );
  } else if (state === "paused") {
    box.textContent = `paused after ${n} generations: Resume continues from the current mean, Reset starts over`;
  } else if (state === "idle") {
    box.textContent = "";
  }
}

async function start(event) {
  event?.preventDefault();
  if (running || document.body.dataset.state === "compiling") return;
  clearError($("error"));
  lastError = undefined;
  if (!sim) {
    setState("compiling");
    try {
      sim = await createSimulation(spec());
      theta = new Float32Array(sim.info.parameters); // the mean starts at zero
      $("stat-parameters").textContent = String(sim.info.parameters);
    } catch (e) {
      fail(e, "Compiling the simulation");
      return;
    }
  }
  // Resuming at the pause: as many generations again.
  if (stats.length >= until()) $("until").value = String(stats.length + until());
  stopRequested = false;
  running = true;
  setState("running");
  loop = evolveLoop();
  await loop;
}

function pause() {
  if (!running) return;
  stopRequested = true;
  setState("running"); // Pause disabled, the status says the call in flight finishes first
}

async function reset() {
  if (running) {
    stopRequested = true;
    setState("running");
    await loop;
  }
  sim?.free();
  sim = undefined;
  theta = undefined;
  stats = [];
  calls = 0;
  recent = [];
  player.current = player.pending = undefined;
  clearError($("error"));
  lastError = undefined;
  $("stat-parameters").textContent = "–";
  render();
  drawIdle();
  setState("idle");
}

function fail(e, what) {
  lastError = { kind: errorKind(e), message: e?.message ?? String(e) };
  showError($("error"), e, what);
  $("status").textContent = "";
  setState("error");
}

// ---------------------------------------------------------------- the loop

async function evolveLoop() {
  try {
    // The pause field may change while the run goes on: checked before every call.
    while (!stopRequested && stats.length < until()) {
      const o = callOptions();
      const t0 = performance.now();
      const r = await sim.evolve(theta, o);
      const ms = performance.now() - t0;
      theta = r.theta;
      stats.push(...r.stats);
      calls++;
      recent.push({ generations: r.stats.length, ms });
      if (recent.length > 5) recent.shift();
      showPolicy();
      render();
      status();
    }
    running = false;
    setState("paused");
  } catch (e) {
    running = false;
    fail(e, "Evolution");
  }
}

function generationsPerSecond() {
  const g = recent.reduce((a, c) => a + c.generations, 0);
  const ms = recent.reduce((a, c) => a + c.ms, 0);
  return ms > 0 ? (g * 1000) / ms : undefined;
}

/** The mean policy's episode, from a different member's initial state after every call. */
function showPolicy() {
  if (!sim.info.hasCpuReference) return;
  const member = (calls - 1) % sim.info.population;
  const t = sim.trace(theta, { member });
  player.pending = {
    states: t.states,
    size: t.stateSize,
    actions: t.actions,
    steps: t.fitness.steps,
    reward: t.fitness.totalReward,
    member,
    generation: stats.length,
    episodeLength: sim.info.episodeLength,
  };
  if (!$("animate").checked) drawStill(player.pending);
  else if (!player.current) play(performance.now());
}

// ---------------------------------------------------------------- fitness curve

function niceStep(max, ticks = 5) {
  const raw = max / ticks;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? raw;
}

function el(name, attrs = {}, text) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

/** [generation, mean, best] points; beyond CURVE_POINTS, buckets of consecutive generations. */
function curvePoints() {
  const n = stats.length;
  const per = Math.max(1, Math.ceil(n / CURVE_POINTS));
  const out = [];
  for (let i = 0; i < n; i += per) {
    const bucket = stats.slice(i, i + per);
    const mean = bucket.reduce((a, s) => a + s.meanReward, 0) / bucket.length;
    const best = Math.max(...bucket.map((s) => s.bestReward));
    out.push([i + bucket.length, mean, best]);
  }
  return out;
}

function drawCurve() {
  const width = 600, height = 270, left = 48, right = 14, top = 12, bottom = 40;
  const episodeLength = sim?.info.episodeLength ?? Number($("episode-length").value);
  const n = Math.max(stats.length, 10);
  const xStep = niceStep(n);
  const xMax = Math.ceil(n / xStep) * xStep;
  const yStep = niceStep(episodeLength);
  const yMax = Math.ceil(episodeLength / yStep) * yStep;
  const x = (g) => left + (g / xMax) * (width - left - right);
  const y = (v) => height - bottom - (Math.max(0, Math.min(v, yMax)) / yMax) * (height - top - bottom);

  const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": "mean and best reward per generation" });
  for (let v = 0; v <= yMax + 1e-9; v += yStep) {
    svg.append(el("line", { x1: left, x2: width - right, y1: y(v), y2: y(v), class: "grid-line" }));
    svg.append(el("text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, fmtNumber(v, 0)));
  }
  for (let g = 0; g <= xMax + 1e-9; g += xStep) {
    svg.append(el("line", { x1: x(g), x2: x(g), y1: height - bottom, y2: height - bottom + 4, class: "axis" }));
    svg.append(el("text", { x: x(g), y: height - bottom + 16, "text-anchor": "middle" }, fmtNumber(g, 0)));
  }
  svg.append(el("line", { x1: left, x2: left, y1: top, y2: height - bottom, class: "axis" }));
  svg.append(el("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, class: "axis" }));
  svg.append(el("line", { x1: left, x2: width - right, y1: y(episodeLength), y2: y(episodeLength), class: "limit-line" }));
  svg.append(el("text", { x: width - right, y: y(episodeLength) - 4, "text-anchor": "end" }, `episode length ${episodeLength}`));
  svg.append(el("text", { x: (left + width - right) / 2, y: height - 4, "text-anchor": "middle" }, "generation"));
  svg.append(el("text", { x: 12, y: (top + height - bottom) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(top + height - bottom) / 2})` }, "reward (steps balanced)"));

  const points = curvePoints();
  if (points.length > 0) {
    const line = (i, cls) => el("polyline", { points: points.map((p) => `${x(p[0]).toFixed(1)},${y(p[i]).toFixed(1)}`).join(" "), class: cls });
    svg.append(line(2, "curve-best"), line(1, "curve-mean"));
    const [g, mean, best] = points.at(-1);
    svg.append(el("circle", { cx: x(g), cy: y(mean), r: 3, class: "curve-dot" }));
    svg.lastChild.append(el("title", {}, `generation ${g}: mean ${fmtNumber(mean)}, best ${fmtNumber(best)}`));
  }
  $("curve").replaceChildren(svg);
}

function render() {
  drawCurve();
  const last = stats.at(-1);
  $("stat-generations").textContent = String(stats.length);
  $("stat-rate").textContent = fmtNumber(generationsPerSecond(), 1);
  $("stat-mean").textContent = last ? fmtNumber(last.meanReward, 1) : "–";
  $("stat-best").textContent = last ? fmtNumber(last.bestReward, 1) : "–";
  $("stat-calls").textContent = String(calls);
}

// ---------------------------------------------------------------- the cart and pole

const canvas = $("cart");
const ctx = canvas.getContext("2d");
const W = 600, H = 260, TRACK_Y = 200, SCALE = W / 5.6; // pixels per metre: the ±2.4 track and a margin
const player = { current: undefined, pending: undefined, started: 0, raf: 0 };

function setupCanvas() {
  const dpr = Math.min(window.devicePixelRatio || 1, 3);
  canvas.width = Math.round(W * dpr);
  canvas.height = Math.round(H * dpr);
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

function colors() {
  const css = getComputedStyle(document.documentElement);
  const v = (name) => css.getPropertyValue(name).trim();
  return { fg: v("--fg"), muted: v("--muted"), border: v("--border"), accent: v("--accent"), good: v("--good"), bad: v("--bad"), soft: v("--soft") };
}

function drawTrack(c) {
  ctx.clearRect(0, 0, W, H);
  const x0 = W / 2 - 2.4 * SCALE, x1 = W / 2 + 2.4 * SCALE;
  ctx.strokeStyle = c.muted;
  ctx.lineWidth = 2;
  ctx.beginPath();
  ctx.moveTo(x0, TRACK_Y + 11);
  ctx.lineTo(x1, TRACK_Y + 11);
  ctx.stroke();
  ctx.fillStyle = c.muted;
  for (const xe of [x0, x1]) ctx.fillRect(xe - 1.5, TRACK_Y - 4, 3, 22);
  ctx.font = "11px system-ui, sans-serif";
  ctx.textAlign = "center";
  ctx.fillText("x = −2.4", x0, TRACK_Y + 32);
  ctx.fillText("0", W / 2, TRACK_Y + 32);
  ctx.fillText("x = 2.4", x1, TRACK_Y + 32);
  ctx.fillRect(W / 2 - 0.5, TRACK_Y + 8, 1, 7);
}

/** One state [x, x_dot, theta, theta_dot]; `action` 1 pushes right, 0 left. */
function drawCartPole(c, s, { alpha = 1, action, fallen = false } = {}) {
  const [xPos, , angle] = s;
  const cx = W / 2 + xPos * SCALE;
  const cartW = 0.5 * SCALE, cartH = 0.28 * SCALE;
  const top = TRACK_Y - cartH + 6;
  ctx.globalAlpha = alpha;
  // Cart and wheels.
  ctx.fillStyle = c.fg;
  ctx.beginPath();
  ctx.roundRect(cx - cartW / 2, top, cartW, cartH - 6, 4);
  ctx.fill();
  ctx.fillStyle = c.muted;
  for (const dx of [-cartW / 3, cartW / 3]) {
    ctx.beginPath();
    ctx.arc(cx + dx, TRACK_Y + 5, 5, 0, 2 * Math.PI);
    ctx.fill();
  }
  // The pole: 1.0 long, pivoting on the cart's top; theta > 0 leans right.
  const len = 1.0 * SCALE;
  ctx.strokeStyle = fallen ? c.bad : c.accent;
  ctx.lineWidth = 8;
  ctx.lineCap = "round";
  ctx.beginPath();
  ctx.moveTo(cx, top);
  ctx.lineTo(cx + len * Math.sin(angle), top - len * Math.cos(angle));
  ctx.stroke();
  ctx.fillStyle = c.soft;
  ctx.beginPath();
  ctx.arc(cx, top, 3.5, 0, 2 * Math.PI);
  ctx.fill();
  // The push of this step.
  if (action !== undefined) {
    const dir = action >= 0.5 ? 1 : -1;
    const ax = cx - dir * (cartW / 2 + 6), ay = top + (cartH - 6) / 2;
    ctx.fillStyle = c.good;
    ctx.beginPath();
    ctx.moveTo(ax, ay);
    ctx.lineTo(ax - dir * 12, ay - 7);
    ctx.lineTo(ax - dir * 12, ay + 7);
    ctx.closePath();
    ctx.fill();
  }
  ctx.globalAlpha = 1;
}

const stateAt = (ep, k) => ep.states.slice(k * ep.size, k * ep.size + 4);

function caption(ep, k) {
  const end = ep.steps < ep.episodeLength ? "the pole falls or the cart leaves the track" : "balanced to the end";
  return `the mean after generation ${ep.generation}, from member ${ep.member}'s start · step ${k} of ${ep.steps} (${end}; reward ${fmtNumber(ep.reward, 0)})`;
}

function drawLabel(c, text) {
  ctx.fillStyle = c.muted;
  ctx.font = "12px ui-monospace, Menlo, Consolas, monospace";
  ctx.textAlign = "left";
  ctx.fillText(text, 10, 18);
}

function drawFrame(ep, k) {
  const c = colors();
  drawTrack(c);
  const last = k >= ep.steps;
  drawCartPole(c, stateAt(ep, k), { action: last ? undefined : ep.actions[k], fallen: last && ep.steps < ep.episodeLength });
  drawLabel(c, `step ${k} / ${ep.steps}`);
  $("episode").textContent = caption(ep, k);
  framesDrawn++;
}

/** Reduced motion: one still — every 25th state faded, and the last. */
function drawStill(ep) {
  const c = colors();
  drawTrack(c);
  for (let k = 0; k < ep.steps; k += 25) drawCartPole(c, stateAt(ep, k), { alpha: 0.15 });
  drawCartPole(c, stateAt(ep, ep.steps), { fallen: ep.steps < ep.episodeLength });
  drawLabel(c, `${ep.steps} steps`);
  $("episode").textContent = caption(ep, ep.steps);
  framesDrawn++;
}

function drawIdle() {
  cancelAnimationFrame(player.raf);
  player.raf = 0;
  const c = colors();
  drawTrack(c);
  drawCartPole(c, [0, 0, 0, 0], { alpha: 0.35 });
  $("episode").textContent = "no policy yet: press Start";
  framesDrawn++;
}

/** Starts the newest episode (or the current one again) at `now`. */
function play(now) {
  if (player.pending) {
    player.current = player.pending;
    player.pending = undefined;
  }
  player.started = now;
  player.shown = -1;
  if (!player.raf) player.raf = requestAnimationFrame(tick);
}

function tick(now) {
  player.raf = 0;
  const ep = player.current;
  if (!ep || !$("animate").checked) return;
  const k = Math.min(ep.steps, Math.floor((now - player.started) / STEP_MS));
  if (k !== player.shown) {
    drawFrame(ep, k);
    player.shown = k;
  }
  if (now - player.started >= ep.steps * STEP_MS + HOLD_MS) {
    play(now); // the newest episode, or this one again
    return;
  }
  player.raf = requestAnimationFrame(tick);
}

$("animate").addEventListener("change", () => {
  const ep = player.pending ?? player.current;
  if (!ep) return;
  if ($("animate").checked) play(performance.now());
  else {
    cancelAnimationFrame(player.raf);
    player.raf = 0;
    player.current = ep;
    player.pending = undefined;
    drawStill(ep);
  }
});
new ResizeObserver(() => {
  // devicePixelRatio changes with zoom: redraw at the new resolution.
  const dpr = Math.min(window.devicePixelRatio || 1, 3);
  if (canvas.width === Math.round(W * dpr)) return;
  setupCanvas();
  if (player.current && !$("animate").checked) drawStill(player.current);
  else if (!player.current) drawIdle();
}).observe(canvas);

// ---------------------------------------------------------------- wiring

window.fuselmEvolve = {
  get state() {
    return document.body.dataset.state;
  },
  get running() {
    return running;
  },
  get generations() {
    return stats.length;
  },
  /** Every generation's { meanReward, bestReward, bestMember }, in order. */
  get stats() {
    return stats.map((s) => ({ ...s }));
  },
  get calls() {
    return calls;
  },
  get generationsPerSecond() {
    return generationsPerSecond();
  },
  get info() {
    return sim?.info;
  },
  get theta() {
    return theta ? Array.from(theta) : undefined;
  },
  /** The episode on the canvas: { generation, member, steps, reward, episodeLength }. */
  get episode() {
    const ep = player.current ?? player.pending;
    return ep && { generation: ep.generation, member: ep.member, steps: ep.steps, reward: ep.reward, episodeLength: ep.episodeLength };
  },
  get framesDrawn() {
    return framesDrawn;
  },
  get error() {
    return lastError;
  },
  get adapter() {
    return adapter;
  },
  start: () => start(),
  pause,
  reset,
};

$("form").addEventListener("submit", start);
$("pause").addEventListener("click", pause);
$("reset").addEventListener("click", reset);

$("animate").checked = !reducedMotion.matches;
setupCanvas();
drawIdle();
render();
$("start").disabled = true;
await identify();
applyParams(); // the URL overrides the adapter-based defaults
render();
if (document.body.dataset.state !== "error") setState("idle");
else $("start").disabled = false;
if (params.has("autorun")) start();
