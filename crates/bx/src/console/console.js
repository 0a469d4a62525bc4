// The live views. The inbox: the server-sent events of /events add each waiting approval (an
// <li> the server rendered, every outside string already escaped there) and remove each
// resolved one; the expiry counts down. Live calls: each `call` event is a row the server
// rendered, inserted or put in place of the call's earlier row; the filter hides the rows it
// leaves out, comparing the rows' data attributes as strings. Nothing here builds markup from
// data.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live) {
    return;
  }
  const inbox = document.getElementById("inbox");
  const rows = document.getElementById("call-rows");
  const filter = document.getElementById("call-filter");
  const empty = document.getElementById("empty");
  function showEmpty() {
    if (empty && inbox) {
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
  function parsed(html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    return template.content.firstElementChild;
  }
  function shows(row) {
    if (!filter) {
      return true;
    }
    const session = filter.elements.session.value.trim();
    const tool = filter.elements.tool.value.trim();
    const outcome = filter.elements.outcome.value;
    return row.dataset.session.includes(session) && row.dataset.tool.includes(tool)
      && (outcome === "" || row.dataset.outcome === outcome);
  }
  function applyFilter() {
    if (!rows) {
      return;
    }
    for (const row of rows.children) {
      row.hidden = !shows(row);
    }
  }
  if (filter) {
    filter.addEventListener("input", applyFilter);
    filter.addEventListener("change", applyFilter);
    filter.addEventListener("submit", function (event) {
      event.preventDefault();
      applyFilter();
      const query = new URLSearchParams(new FormData(filter)).toString();
      window.history.replaceState(null, "", "/calls?" + query);
    });
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
    if (!inbox) {
      return;
    }
    const item = parsed(event.data);
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
  source.addEventListener("call", function (event) {
    if (!rows) {
      return;
    }
    const row = parsed(event.data);
    if (!row) {
      return;
    }
    const earlier = document.getElementById(row.id);
    if (earlier) {
      const was = earlier.querySelector("td.arguments");
      const now = row.querySelector("td.arguments");
      if (was && now && now.childNodes.length === 0) {
        now.replaceChildren(...was.childNodes);
      }
      earlier.replaceWith(row);
    } else {
      rows.insertBefore(row, rows.firstChild);
    }
    row.hidden = !shows(row);
  });
  source.addEventListener("lagged", function () {
    if (inbox) {
      window.location.reload();
    } else {
      live.textContent = "connected (fell behind: some calls are missing; see Audit)";
    }
  });
  tick();
  window.setInterval(tick, 1000);
})();
