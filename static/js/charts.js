// Draw every server-built Plotly figure on the page: each <figure data-chart> holds its figure
// as JSON in a <script type="application/json"> (Django's json_script), so no data is inlined as code.
(function () {
  "use strict";
  function draw() {
    document.querySelectorAll("figure[data-chart]").forEach(function (fig) {
      var data = fig.querySelector('script[type="application/json"]');
      if (!data || !window.Plotly) { return; }
      var spec = JSON.parse(data.textContent);
      var target = document.createElement("div");
      target.className = "plot";
      fig.appendChild(target);
      window.Plotly.newPlot(target, spec.data, spec.layout, { responsive: true, displaylogo: false })
        .then(function () { fig.setAttribute("data-rendered", String(spec.data.length)); });
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", draw); } else { draw(); }
})();
