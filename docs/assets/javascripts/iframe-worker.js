/* Search on the site opened from disk (file://): Chromium will not start a Web Worker from a file
   URL, and the theme runs its search in one. Here the worker's script runs in a hidden frame of the
   page instead, with the same messages both ways. Served over HTTP, the browser's own Worker runs. */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  function FrameWorker(url) {
    var outer = this;
    this.onmessage = null;
    this._listeners = [];
    this._queue = [];
    this._ready = false;
    var frame = document.createElement("iframe");
    frame.hidden = true;
    frame.setAttribute("aria-hidden", "true");
    frame.tabIndex = -1;
    (document.body || document.documentElement).appendChild(frame);
    var inner = frame.contentWindow;
    this._inner = inner;
    // What the worker posts reaches the page's listeners, as a worker's message would.
    inner.postMessage = function (data) {
      var event = { data: data, target: outer };
      if (typeof outer.onmessage === "function") outer.onmessage(event);
      outer._listeners.slice().forEach(function (listener) { listener.call(outer, event); });
    };
    inner.importScripts = function () {
      Array.prototype.forEach.call(arguments, function (src) {
        var script = inner.document.createElement("script");
        script.src = src;
        inner.document.head.appendChild(script);
      });
    };
    var script = inner.document.createElement("script");
    script.src = new URL(url, location.href).href;
    script.onload = function () {
      outer._ready = true;
      outer._queue.splice(0).forEach(function (data) { outer.postMessage(data); });
    };
    inner.document.head.appendChild(script);
  }
  FrameWorker.prototype.postMessage = function (data) {
    if (!this._ready) { this._queue.push(data); return; }
    this._inner.dispatchEvent(new this._inner.MessageEvent("message", { data: data }));
  };
  FrameWorker.prototype.addEventListener = function (type, listener) {
    if (type === "message" && this._listeners.indexOf(listener) < 0) this._listeners.push(listener);
  };
  FrameWorker.prototype.removeEventListener = function (type, listener) {
    this._listeners = this._listeners.filter(function (l) { return l !== listener; });
  };
  FrameWorker.prototype.terminate = function () {};
  window.Worker = FrameWorker;
})();
