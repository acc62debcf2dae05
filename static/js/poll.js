// Live progress on the submission page: while the run is active, fetch the server-rendered
// fragment every few seconds and swap it in. Without JavaScript a meta refresh does the same.
(function () {
  "use strict";
  var INTERVAL_MS = 2000;
  function tick() {
    var live = document.getElementById("live");
    if (!live || live.dataset.final === "1") { return; }
    fetch(live.dataset.liveUrl, { credentials: "same-origin", headers: { "X-Requested-With": "poll" } })
      .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
      .then(function (html) {
        var holder = document.createElement("div");
        holder.innerHTML = html;
        var fresh = holder.querySelector("#live");
        if (fresh) { live.replaceWith(fresh); }
      })
      .catch(function () { /* keep the last state; try again */ })
      .finally(function () { window.setTimeout(tick, INTERVAL_MS); });
  }
  window.setTimeout(tick, INTERVAL_MS);
})();
