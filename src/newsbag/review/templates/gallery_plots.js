"use strict";
// The gallery's plots and ground-truth helpers (inline SVG, no library): the layout score's strip
// plots, the evaluation's table and GT-vs-score plot, and the ground-truth layer of the page view.
// They hold no state of the list or the page view: gallery.js, loaded after this file, makes them
// with the gallery's data and its shared helpers and calls them.
window.newsbagGalleryPlots = function (data, F, {$, SVG, fmt, rowOf}) {
  // ---- plots (inline SVG, no library) ----
  function el(name, attrs, text) {
    const e = document.createElementNS(SVG, name);
    Object.entries(attrs || {}).forEach(([k, v]) => e.setAttribute(k, v));
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function title(e, text) { e.appendChild(el("title", {}, text)); return e; }
  const PLOT_W = 520, LABEL_W = 200, ROW_H = 17;
  const px = (v) => LABEL_W + 10 + v * (PLOT_W - LABEL_W - 20);
  // One row per variant and source: a dot per page's layout score (x 0..1), the median as a
  // tick; `here` (a page id) is drawn as a large red dot. `notes` adds text after a name.
  function stripPlot(box, here, notes) {
    const names = data.strip;
    const rows = data.rows.filter((r) => r[F.layout]);
    if (!names.length || !rows.length) { box.replaceChildren(); return false; }
    const height = ROW_H * names.length + 24;
    const svg = el("svg", {viewBox: `0 0 ${PLOT_W} ${height}`, role: "img", "aria-label": "layout score per variant and source"});
    [0, 0.5, 1].forEach((v) => {
      svg.appendChild(el("line", {x1: px(v), x2: px(v), y1: 0, y2: height - 18, class: "axis"}));
      svg.appendChild(el("text", {x: px(v), y: height - 4, "text-anchor": "middle"}, String(v)));
    });
    names.forEach((n, k) => {
      const y = ROW_H * k + ROW_H / 2 + 2;
      const label = el("text", {x: LABEL_W, y: y + 4, "text-anchor": "end", class: n.name === data.recommended ? "rec" : ""},
                       `${n.name}${n.name === data.recommended ? " ★" : ""}${notes ? notes(k) : ""}`);
      svg.appendChild(label);
      const values = [];
      rows.forEach((r) => {
        const v = r[F.layout][k];
        if (v === null || v === undefined) return;
        values.push(v);
        if (r[F.page_id] !== here) svg.appendChild(title(el("circle", {cx: px(v), cy: y, r: 3, class: `dot ${n.kind}`}), `${r[F.page_id]}: ${v.toFixed(3)}`));
      });
      if (values.length) {
        values.sort((a, b) => a - b);
        const m = values[Math.floor(values.length / 2)];
        svg.appendChild(el("line", {x1: px(m), x2: px(m), y1: y - 7, y2: y + 7, class: "median"}));
      }
      const mine = here && rowOf(here);
      const v = mine && mine[F.layout] ? mine[F.layout][k] : null;
      if (v !== null && v !== undefined) svg.appendChild(title(el("circle", {cx: px(v), cy: y, r: 5.5, class: "dot here"}), `this page: ${v.toFixed(3)}`));
    });
    box.replaceChildren(svg);
    return true;
  }
  // How many pages each variant is the best variant on (the mean hides this).
  function bestCounts() {
    const counts = data.strip.map(() => 0);
    data.rows.forEach((r) => {
      const l = r[F.layout];
      if (!l) return;
      let best = -1;
      data.strip.forEach((n, k) => {
        if (n.kind === "variant" && l[k] !== null && (best < 0 || l[k] > l[best])) best = k;
      });
      if (best >= 0) counts[best] += 1;
    });
    return (k) => data.strip[k].kind === "variant" ? ` · best on ${counts[k]}` : "";
  }
  // ---- evaluation (evaluation.js, written by `newsbag evaluate` and `newsbag review`) ----
  const GT_COARSE = {text: "text", graphic: "image", image: "image", table: "table", title: "title"};
  function gtLayer(gt) {
    return {name: "ground truth", kind: "gt", failed: false, pending: false, recommended: false,
            width: gt.width, height: gt.height,
            boxes: gt.regions.map(([x0, y0, x1, y1, cls, label]) => [x0, y0, x1, y1, -1, null, null, label, [], [], GT_COARSE[cls] || "other"])};
  }
  function ranks(values) {
    const order = values.map((v, i) => [v, i]).sort((a, b) => a[0] - b[0]);
    const out = new Array(values.length);
    for (let i = 0; i < order.length;) {
      let j = i;
      while (j + 1 < order.length && order[j + 1][0] === order[i][0]) j += 1;
      for (let k = i; k <= j; k += 1) out[order[k][1]] = (i + j) / 2;
      i = j + 1;
    }
    return out;
  }
  function spearman(xs, ys) {
    const rx = ranks(xs), ry = ranks(ys);
    const mean = (a) => a.reduce((s, v) => s + v, 0) / a.length;
    const mx = mean(rx), my = mean(ry);
    let sxy = 0, sxx = 0, syy = 0;
    rx.forEach((x, i) => { sxy += (x - mx) * (ry[i] - my); sxx += (x - mx) ** 2; syy += (ry[i] - my) ** 2; });
    return sxx && syy ? sxy / Math.sqrt(sxx * syy) : null;
  }
  function evaluationTable(ev) {
    const by = {};
    Object.entries(ev.pages).forEach(([pageId, measured]) => Object.entries(measured).forEach(([name, v]) => {
      if (v === null) return;
      const s = ev.scores[pageId] && ev.scores[pageId][name];
      const e = by[name] || (by[name] = {gt: [], score: []});
      e.gt.push(v);
      if (s !== undefined) e.score.push(s);
    }));
    const mean = (a) => a.length ? a.reduce((s, v) => s + v, 0) / a.length : null;
    const rows = Object.entries(by).map(([name, e]) => [name, ev.kinds[name] || "", mean(e.gt), mean(e.score), e.gt.length])
      .sort((a, b) => b[2] - a[2] || a[0].localeCompare(b[0]));
    const table = $("evaluation-table");
    const head = document.createElement("tr");
    ["rank", "name", "kind", `${ev.measure} (GT, higher is better)`, "score (no GT)", "pages"].forEach((t) => {
      const th = document.createElement("th"); th.textContent = t; head.appendChild(th);
    });
    table.tHead.replaceChildren(head);
    const body = document.createDocumentFragment();
    rows.forEach((row, k) => {
      const tr = document.createElement("tr");
      if (k === 0) tr.className = "best";
      [k + 1, row[0] + (k === 0 ? " ★ best" : "") + (row[0] === data.recommended ? " (recommended)" : ""), ...row.slice(1)]
        .forEach((v) => { const td = document.createElement("td"); td.textContent = fmt(v); tr.appendChild(td); });
      tr.dataset.name = row[0];
      body.appendChild(tr);
    });
    table.tBodies[0].replaceChildren(body);
  }
  function evaluationPlot(ev) {
    const pts = [];
    Object.entries(ev.pages).forEach(([pageId, measured]) => Object.entries(measured).forEach(([name, v]) => {
      const s = ev.scores[pageId] && ev.scores[pageId][name];
      if (v !== null && s !== undefined && s !== null) pts.push({pageId, name, x: s, y: v, kind: ev.kinds[name]});
    }));
    const W = 420, H = 300, L = 44, B = 36, T = 8, R = 8;
    const sx = (v) => L + v * (W - L - R), sy = (v) => H - B - v * (H - B - T);
    const svg = el("svg", {viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `layout score (no GT) against ${ev.measure} (GT)`});
    [0, 0.5, 1].forEach((v) => {
      svg.appendChild(el("line", {x1: sx(v), x2: sx(v), y1: T, y2: H - B, class: "axis"}));
      svg.appendChild(el("line", {x1: L, x2: W - R, y1: sy(v), y2: sy(v), class: "axis"}));
      svg.appendChild(el("text", {x: sx(v), y: H - B + 14, "text-anchor": "middle"}, String(v)));
      svg.appendChild(el("text", {x: L - 6, y: sy(v) + 4, "text-anchor": "end"}, String(v)));
    });
    svg.appendChild(el("text", {x: (L + W) / 2, y: H - 4, "text-anchor": "middle"}, "layout score (no ground truth)"));
    svg.appendChild(el("text", {x: 12, y: (T + H - B) / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${(T + H - B) / 2})`},
                       `${ev.measure} (ground truth)`));
    pts.forEach((p) => svg.appendChild(title(el("circle", {cx: sx(p.x), cy: sy(p.y), r: 3, class: `dot ${p.kind}`}),
                                             `${p.name} on ${p.pageId}: score ${p.x.toFixed(3)}, ${ev.measure} ${p.y.toFixed(3)}`)));
    $("evaluation-plot").replaceChildren(svg);
    const rho = pts.length > 2 ? spearman(pts.map((p) => p.x), pts.map((p) => p.y)) : null;
    $("evaluation-note").textContent = `${pts.length} (page, variant or source) pairs; blue: fused variants, grey: sources. ` +
      (rho === null ? "" : `Rank correlation of the no-GT score with ${ev.measure}: ${rho.toFixed(2)} (1 = the score orders layouts as the ground truth does).`) + (ev.tuning ? `\n${ev.tuning.line}` : "");
  }

  return {stripPlot, bestCounts, gtLayer, evaluationTable, evaluationPlot};
};
