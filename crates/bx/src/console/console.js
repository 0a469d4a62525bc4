// The inbox, live: the server-sent events of /events add each waiting approval (an <li> the
// server rendered, every outside string already escaped there) and remove each resolved one.
// The expiry counts down. Nothing here builds markup from data.
"use strict";
(function () {
  const inbox = document.getElementById("inbox");
  const live = document.getElementById("live");
  if (!inbox || !live) {
    return;
  }
  const empty = document.getElementById("empty");
  function showEmpty() {
    if (empty) {
      empty.hidden = inbox.children.length > 0;
    }
  }
  function tick() {
    const now = Date.now();
    for (const span of document.querySelectorAll("span.left[data-expires]")) {
      const left = Math.max(0, Math.floor((Number(span.dataset.expires) - now) / 1000));
      span.textContent = left > 0 ? "in " + left + " s" : "expired";
    }
  }
  const source = new EventSource("/events");
  source.addEventListener("open", function () {
    live.textContent = "connected";
  });
  source.addEventListener("error", function () {
    live.textContent = "reconnecting";
  });
  source.addEventListener("broker", function (event) {
    live.textContent = "the broker: " + event.data;
  });
  source.addEventListener("pending", function (event) {
    const template = document.createElement("template");
    template.innerHTML = event.data;
    const item = template.content.firstElementChild;
    if (!item || document.getElementById(item.id)) {
      return;
    }
    const id = Number(item.dataset.approval);
    let before = null;
    for (const other of inbox.children) {
      if (Number(other.dataset.approval) < id) {
        before = other;
        break;
      }
    }
    inbox.insertBefore(item, before);
    showEmpty();
    tick();
  });
  source.addEventListener("resolved", function (event) {
    const item = document.getElementById("pending-" + event.data);
    if (item) {
      item.remove();
    }
    showEmpty();
  });
  source.addEventListener("lagged", function () {
    window.location.reload();
  });
  tick();
  window.setInterval(tick, 1000);
})();
