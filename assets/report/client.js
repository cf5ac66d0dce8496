// The run report page: renders the data nexrl embedded in #report-data (summary, a chart per
// metric, the rollout browser, the configuration and the checkpoints) with uPlot, and with
// `nexrl report --watch` polls data.json and redraws when the run writes more.
// Plain browser JavaScript, inlined into the report by src/report/html.ts; no network access.
/* global window, document, fetch, CSS, clearTimeout, uPlot */
(function () {
  "use strict";

  /** @param {string} id */
  const readJson = (id) => JSON.parse(/** @type {HTMLElement} */ (document.getElementById(id)).textContent || "null");

  const settings = readJson("report-settings") || {};
  /** Page state; exposed as window.nexrlReport for tests and curious readers. */
  const state = {
    data: readJson("report-data"),
    /** @type {Map<string, any>} uPlot instance of each chart, by metric key */
    charts: new Map(),
    /** @type {any[]} the summary's sparklines */
    sparks: [],
    /** @type {number | null} the rollout browser's step; null follows the latest */
    step: null,
    etag: settings.watch ? settings.watch.etag || null : null,
    updates: 0,
  };
  window.nexrlReport = state;

  const COLORS = { line: "#2563eb", val: "#db2777", positive: "22, 163, 74", negative: "220, 38, 38" };

  /**
   * Creates an element.
   * @param {string} tag
   * @param {Record<string, any>} [attrs]
   * @param {...(Node | string | null | undefined | false)} children
   */
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, String(value));
    }
    for (const child of children) if (child !== null && child !== undefined && child !== false) node.append(child);
    return node;
  }

  /** @param {unknown} x */
  function fmt(x) {
    if (typeof x !== "number") return x === null || x === undefined ? "–" : String(x);
    if (Number.isInteger(x)) return String(x);
    const a = Math.abs(x);
    if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(2);
    return x.toFixed(a < 1 ? 4 : a < 100 ? 3 : 1);
  }

  // ---------------------------------------------------------------------------------------------
  // Layout

  function render() {
    const app = /** @type {HTMLElement} */ (document.getElementById("app"));
    for (const chart of state.charts.values()) chart.destroy();
    for (const spark of state.sparks.splice(0)) spark.destroy();
    state.charts.clear();
    const scrollY = window.scrollY;
    app.replaceChildren(
      header(),
      section("summary", "Summary", summary()),
      section("metrics", "Metrics", metrics()),
      section("rollouts", "Rollouts", rollouts()),
      ...(state.data.failures.length ? [section("failures", "Failures", failures())] : []),
      section("checkpoints", "Checkpoints", checkpoints()),
      section(
        "config",
        "Configuration",
        el("pre", { class: "config", text: state.data.config || "(no config.resolved.yaml)" }),
      ),
    );
    drawCharts();
    drawSparklines();
    window.scrollTo(0, scrollY);
  }

  /**
   * @param {string} id
   * @param {string} title
   * @param {Node} body
   */
  function section(id, title, body) {
    return el("section", { id }, el("h2", { text: title }), body);
  }

  function header() {
    const d = state.data;
    const links = ["summary", "metrics", "rollouts", "checkpoints", "config"].map((id) =>
      el("a", { href: `#${id}`, text: id }),
    );
    return el(
      "header",
      {},
      el("h1", {}, el("span", { class: "brand", text: "nexrl run report · " }), d.title),
      el("div", { class: "meta" }, `${d.runDir} · read ${d.generatedAt}`),
      settings.watch
        ? el("div", { class: "live", id: "live" }, `live: polling every ${settings.watch.intervalMs / 1000} s`)
        : null,
      el("nav", {}, ...links),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Summary

  function summary() {
    const { items, trends } = state.data.summary;
    const table = el(
      "table",
      { class: "facts" },
      ...items.map((/** @type {any} */ item) =>
        el("tr", {}, el("th", { text: item.label }), el("td", { text: item.value })),
      ),
    );
    const cards = trends.map((/** @type {any} */ t) =>
      el(
        "div",
        { class: "trend", "data-key": t.key },
        el("div", { class: "trend-key", text: t.key }),
        el("div", { class: "trend-values" }, `${fmt(t.first.value)} → ${fmt(t.last.value)}`),
        el("div", { class: "spark", "data-key": t.key }),
        el(
          "div",
          { class: "trend-steps" },
          `step ${t.first.step} → ${t.last.step}` +
            (t.key.startsWith("val/") ? ` · best ${fmt(t.max.value)} at step ${t.max.step}` : ""),
        ),
      ),
    );
    return el("div", {}, el("div", { class: "trends" }, ...cards), table);
  }

  // ---------------------------------------------------------------------------------------------
  // Metrics: one uPlot chart per key, grouped by family, the validation counterpart overlaid

  function metrics() {
    if (state.data.families.length === 0) return el("p", { text: "No metrics yet (metrics.jsonl is empty)." });
    return el(
      "div",
      {},
      ...state.data.families.map((/** @type {any} */ family) =>
        el(
          "div",
          { class: "family", "data-family": family.name },
          el("h3", {}, `${family.name}/`, el("span", { class: "count", text: ` ${family.charts.length} metrics` })),
          el(
            "div",
            { class: "charts" },
            ...family.charts.map((/** @type {any} */ chart) =>
              el("div", { class: "chart", "data-key": chart.key, "data-overlay": chart.overlay }),
            ),
          ),
        ),
      ),
    );
  }

  /**
   * Steps and values of `key` (and of `overlay`) over the rows that have either.
   * @param {string} key
   * @param {string | undefined} overlay
   * @returns {import("uplot").AlignedData}
   */
  function series(key, overlay) {
    /** @type {number[]} */ const xs = [];
    /** @type {(number | null)[]} */ const ys = [];
    /** @type {(number | null)[]} */ const vs = [];
    const rows = [...state.data.metrics].sort((a, b) => a.step - b.step);
    for (const row of rows) {
      const y = typeof row[key] === "number" ? row[key] : null;
      const v = overlay && typeof row[overlay] === "number" ? row[overlay] : null;
      if (y === null && v === null) continue;
      if (xs.length && xs[xs.length - 1] === row.step) continue;
      xs.push(row.step);
      ys.push(y);
      vs.push(v);
    }
    return overlay ? [xs, ys, vs] : [xs, ys];
  }

  /**
   * The y range of a chart: uPlot's own, except that a flat line sits in the middle of a small band.
   * @param {import("uplot")} _u
   * @param {number | null} min
   * @param {number | null} max
   * @returns {import("uplot").Range.MinMax}
   */
  function yRange(_u, min, max) {
    if (min === null || max === null) return [0, 1];
    if (min === max) {
      const pad = min === 0 ? 1 : Math.abs(min) * 0.1;
      return [min - pad, max + pad];
    }
    return uPlot.rangeNum(min, max, 0.1, true);
  }

  function drawCharts() {
    for (const node of document.querySelectorAll(".chart")) {
      const div = /** @type {HTMLElement} */ (node);
      const key = /** @type {string} */ (div.dataset.key);
      const overlay = div.dataset.overlay;
      const data = series(key, overlay);
      const points = Array.from(data[1]).filter((v) => v !== null).length;
      div.dataset.points = String(points);
      const isVal = key.startsWith("val/");
      /** @type {import("uplot").Series[]} */
      const seriesOpts = [
        { label: "step" },
        {
          label: key,
          stroke: isVal ? COLORS.val : COLORS.line,
          width: 1.5,
          spanGaps: true,
          points: { show: isVal || points <= 60, size: isVal ? 6 : 4, fill: isVal ? COLORS.val : COLORS.line },
        },
      ];
      if (overlay)
        seriesOpts.push({
          label: overlay,
          stroke: COLORS.val,
          width: 0,
          spanGaps: true,
          paths: () => null,
          points: { show: true, size: 7, fill: COLORS.val },
        });
      const chart = new uPlot(
        {
          title: key,
          width: Math.max(240, div.clientWidth),
          height: 180,
          scales: { x: { time: false }, y: { range: yRange } },
          axes: [{ size: 30 }, { size: 56 }],
          legend: { show: true, live: true },
          cursor: { drag: { x: true, y: false } },
          series: seriesOpts,
        },
        data,
        div,
      );
      state.charts.set(key, chart);
    }
  }

  /** A small line of each summary metric over the steps, without axes. */
  function drawSparklines() {
    for (const node of document.querySelectorAll(".spark")) {
      const div = /** @type {HTMLElement} */ (node);
      const key = /** @type {string} */ (div.dataset.key);
      const isVal = key.startsWith("val/");
      const color = isVal ? COLORS.val : COLORS.line;
      const spark = new uPlot(
        {
          width: 200,
          height: 44,
          scales: { x: { time: false }, y: { range: yRange } },
          axes: [{ show: false }, { show: false }],
          legend: { show: false },
          cursor: { show: false },
          series: [{}, { stroke: color, width: 1.5, spanGaps: true, points: { show: false } }],
        },
        series(key, undefined),
        div,
      );
      state.sparks.push(spark);
    }
  }

  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = window.setTimeout(() => {
      for (const [key, chart] of state.charts) {
        const div = document.querySelector(`.chart[data-key="${CSS.escape(key)}"]`);
        if (div) chart.setSize({ width: Math.max(240, div.clientWidth), height: 180 });
      }
    }, 150);
  });

  // ---------------------------------------------------------------------------------------------
  // Rollouts

  /** @returns {number[]} */
  function sampleSteps() {
    return [...new Set(state.data.samples.map((/** @type {any} */ s) => s.step))].sort((a, b) => a - b);
  }

  function rollouts() {
    const steps = sampleSteps();
    if (steps.length === 0) return el("p", { text: "No rollouts yet (samples.jsonl is empty)." });
    const step = state.step !== null && steps.includes(state.step) ? state.step : steps[steps.length - 1];
    const at = state.data.samples.filter((/** @type {any} */ s) => s.step === step);
    const index = steps.indexOf(step);
    /** @param {number} to */
    const go = (to) => {
      state.step = to === steps[steps.length - 1] ? null : to;
      rerenderRollouts();
    };
    const select = el(
      "select",
      {
        id: "step-select",
        onchange: (/** @type {Event} */ e) => go(Number(/** @type {HTMLSelectElement} */ (e.target).value)),
      },
      ...steps.map((s) => el("option", { value: s, selected: s === step, text: `step ${s}` })),
    );
    const controls = el(
      "div",
      { class: "controls" },
      el("button", { type: "button", disabled: index === 0, onclick: () => go(steps[index - 1]) }, "◀ previous"),
      select,
      el(
        "button",
        { type: "button", disabled: index === steps.length - 1, onclick: () => go(steps[index + 1]) },
        "next ▶",
      ),
      el("span", {
        class: "count",
        text: `${countText(at)} at step ${step}${state.step === null ? " (latest)" : ""}`,
      }),
    );
    const maxAbs = Math.max(
      1e-9,
      ...at.flatMap((/** @type {any} */ s) => (s.response_tokens && s.response_tokens.advantages) || []).map(Math.abs),
    );
    return el(
      "div",
      { id: "rollout-browser", "data-step": step },
      controls,
      legend(),
      el("div", { class: "cards" }, ...at.map((/** @type {any} */ s, /** @type {number} */ i) => card(s, i, maxAbs))),
    );
  }

  /** @param {any[]} rows the sample rows of a step */
  function countText(rows) {
    const validation = rows.filter((s) => s.validation).length;
    const training = `${rows.length - validation} rollouts`;
    return validation === 0 ? training : `${training} and ${validation} validation rollouts`;
  }

  function rerenderRollouts() {
    const browser = document.getElementById("rollout-browser");
    const fresh = rollouts();
    if (browser) browser.replaceWith(fresh);
  }

  function legend() {
    return el(
      "div",
      { class: "legend" },
      el("span", { class: "tok trained" }, "trained token"),
      el("span", { class: "tok trained", style: `background: rgba(${COLORS.positive}, 0.55)` }, "advantage > 0"),
      el("span", { class: "tok trained", style: `background: rgba(${COLORS.negative}, 0.55)` }, "advantage < 0"),
      el("span", { class: "tok context" }, "not trained (mask 0)"),
      el("span", { class: "hint", text: "hover a token for its id, logprob and advantage" }),
    );
  }

  /**
   * @param {any} s a row of samples.jsonl
   * @param {number} i
   * @param {number} maxAbs largest |advantage| at this step, for the colour scale
   */
  function card(s, i, maxAbs) {
    const facts = [
      ["reward", fmt(s.reward)],
      ["advantage", fmt(s.advantage)],
      ["group", s.group ?? "–"],
      ["run", s.run ?? "–"],
      ["policy", s.policy_version ?? "–"],
    ];
    return el(
      "article",
      { class: "rollout", "data-index": i },
      el(
        "div",
        { class: "rollout-head" },
        ...facts.map(([k, v]) => el("span", { class: "fact" }, el("b", { text: k }), ` ${v}`)),
        s.diagnostics ? el("span", { class: "badge warn", text: `${s.diagnostics.length} prefix break(s)` }) : null,
        s.calls ? el("span", { class: "badge", text: `${s.calls.length} call(s)` }) : null,
        s.validation ? el("span", { class: "badge validation", text: "validation" }) : null,
        s.trained === false && !s.validation ? el("span", { class: "badge", text: "not trained on" }) : null,
      ),
      el("div", { class: "label", text: "prompt" }),
      el("pre", { class: "prompt", text: s.prompt }),
      el("div", { class: "label", text: s.validation ? "what the model wrote" : "response" }),
      s.response_tokens ? tokens(s, maxAbs) : el("pre", { class: "response", text: s.response }),
      // A validation row's target (for SFT, the row's own answer) beside what the model wrote.
      typeof s.target === "string" ? el("div", { class: "label", text: "target" }) : null,
      typeof s.target === "string" ? el("pre", { class: "target", text: s.target }) : null,
      s.calls ? calls(s.calls) : null,
      s.diagnostics ? diagnostics(s.diagnostics) : null,
    );
  }

  /** @param {string} text @param {number} id */
  function shown(text, id) {
    if (text === "") return `⟨${id}⟩`;
    // Control characters other than tab and newline print as \xNN: they are invisible otherwise.
    return Array.from(text, (c) => {
      const code = c.charCodeAt(0);
      if (c === "\t") return "⇥";
      if (c === "\n") return "↵\n";
      return code < 32 || code === 127 ? `\\x${code.toString(16).padStart(2, "0")}` : c;
    }).join("");
  }

  /**
   * The response token by token: coloured by loss mask and advantage, logprob in the tooltip;
   * each trained span after an untrained one starts a new agent turn.
   * @param {any} s
   * @param {number} maxAbs
   */
  function tokens(s, maxAbs) {
    const t = s.response_tokens;
    const trainedCalls = (s.calls || []).filter((/** @type {any} */ c) => c.completion_tokens > 0);
    const box = el("div", { class: "tokens" });
    let turn = 0;
    for (let j = 0; j < t.ids.length; j++) {
      const trained = t.loss_mask[j] === 1;
      if (s.calls && trained && (j === 0 || t.loss_mask[j - 1] !== 1)) {
        const call = trainedCalls[turn++];
        if (call)
          box.append(
            el("span", {
              class: "turn",
              text: `turn ${call.turn}${call.tool_calls && call.tool_calls.length ? ` → ${call.tool_calls.join(", ")}` : ""}`,
            }),
          );
      }
      const adv = t.advantages ? t.advantages[j] : null;
      const lp = t.logprobs ? t.logprobs[j] : null;
      let style;
      if (trained && adv !== null && adv !== 0) {
        const alpha = 0.15 + (0.6 * Math.abs(adv)) / maxAbs;
        style = `background: rgba(${adv > 0 ? COLORS.positive : COLORS.negative}, ${alpha.toFixed(3)})`;
      }
      const title = [
        `token ${t.ids[j]} ${JSON.stringify(t.text[j])}`,
        `logprob ${lp === null ? "– (not sampled)" : lp.toFixed(4)}`,
        `advantage ${adv === null ? "–" : fmt(adv)}`,
        trained ? "trained (loss mask 1)" : "not trained (loss mask 0)",
      ].join("\n");
      box.append(
        el("span", {
          class: `tok ${trained ? "trained" : "context"}${t.text[j] === "" ? " special" : ""}`,
          style,
          title,
          "data-logprob": lp === null ? undefined : lp,
          text: shown(t.text[j], t.ids[j]),
        }),
      );
    }
    return box;
  }

  /** @param {any[]} list */
  function calls(list) {
    const head = ["turn", "endpoint", "prompt tokens", "completion tokens", "finish", "tool calls", "ms"];
    return el(
      "details",
      { class: "calls" },
      el("summary", { text: `agent calls (${list.length})` }),
      el(
        "table",
        {},
        el("tr", {}, ...head.map((h) => el("th", { text: h }))),
        ...list.map((c) =>
          el(
            "tr",
            {},
            ...[
              c.turn,
              c.endpoint,
              c.prompt_tokens,
              c.completion_tokens,
              c.finish_reason,
              (c.tool_calls || []).join(", ") || "–",
              c.duration_ms,
            ].map((v) => el("td", { text: v === undefined || v === null ? "–" : String(v) })),
          ),
        ),
      ),
    );
  }

  /**
   * A text whose first character is highlighted: where two token histories first differ.
   * @param {string} text
   */
  function firstMarked(text) {
    const chars = Array.from(text || "");
    return el(
      "span",
      {},
      el("mark", { text: chars[0] === undefined ? "(end)" : shown(chars[0], 0) }),
      chars.slice(1).join(""),
    );
  }

  /** @param {any[]} list */
  function diagnostics(list) {
    return el(
      "div",
      { class: "diagnostics" },
      ...list.map((d) =>
        d.kind === "prefix_break"
          ? el(
              "div",
              { class: "break" },
              el("div", { class: "break-title", text: `prefix break: ${d.message}` }),
              el(
                "div",
                { class: "break-body" },
                el(
                  "div",
                  {},
                  el("b", { text: "shared context " }),
                  el("code", { text: `…${(d.context || "").slice(-80)}` }),
                ),
                el(
                  "div",
                  {},
                  el("b", { text: `expected token ${d.expected_token ?? "end"} ` }),
                  el("code", {}, firstMarked(d.expected)),
                ),
                el(
                  "div",
                  {},
                  el("b", { text: `actual token ${d.actual_token ?? "end"} ` }),
                  el("code", {}, firstMarked(d.actual)),
                ),
              ),
            )
          : el("pre", { class: "break", text: JSON.stringify(d, null, 1) }),
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // Failures, checkpoints

  function failures() {
    return el(
      "div",
      {},
      el("p", { text: `${state.data.failures.length} rows of failures.jsonl (the latest last)` }),
      ...state.data.failures.map((/** @type {any} */ f) => el("pre", { class: "failure", text: JSON.stringify(f) })),
    );
  }

  function checkpoints() {
    const d = state.data;
    const rows = d.checkpoints.map((/** @type {any} */ c) =>
      el(
        "tr",
        {},
        ...[c.step, c.file, c.trainingState, `${c.sampler} (step ${c.samplerVersion})`, c.savedAt].map((v) =>
          el("td", { text: String(v) }),
        ),
      ),
    );
    return el(
      "div",
      {},
      d.checkpoints.length
        ? el(
            "table",
            { class: "checkpoints" },
            el(
              "tr",
              {},
              ...["step", "run state", "training state", "sampler", "saved at"].map((h) => el("th", { text: h })),
            ),
            ...rows,
          )
        : el("p", { text: "No checkpoints (trainer.save_freq saves them)." }),
      d.snapshots.length
        ? el(
            "p",
            { class: "snapshots" },
            `Sampler snapshots (local engine): ${d.snapshots.map((/** @type {any} */ s) => `step ${s.step}: ${s.file}`).join(" · ")}`,
          )
        : null,
      el(
        "p",
        { class: "hint" },
        "Sample a checkpoint with ",
        el("code", { text: `nexrl sample ${d.runDir}:STEP "PROMPT"` }),
        ".",
      ),
    );
  }

  // ---------------------------------------------------------------------------------------------
  // --watch: poll data.json, redraw on change

  async function poll() {
    const live = document.getElementById("live");
    try {
      const res = await fetch("data.json", {
        cache: "no-store",
        headers: state.etag ? { "If-None-Match": state.etag } : {},
      });
      if (res.status === 200) {
        state.etag = res.headers.get("ETag");
        state.data = await res.json();
        state.updates += 1;
        render();
      }
      const now = document.getElementById("live");
      if (now) now.textContent = `live: checked ${new Date().toLocaleTimeString()} · ${state.updates} update(s)`;
    } catch {
      if (live) live.textContent = "live: the report server stopped; showing the last data";
      return;
    }
    window.setTimeout(poll, settings.watch.intervalMs);
  }

  render();
  if (settings.watch) window.setTimeout(poll, settings.watch.intervalMs);
})();
