// The Jupyter widgets manager (embed-amd.js) typesets widget labels with
// the MathJax 2 API, MathJax.Hub.Queue(["Typeset", MathJax.Hub, node]);
// this site serves MathJax 3, which has no Hub, so every page with widgets
// threw "Cannot read properties of undefined (reading 'Queue')".  This
// script gives every MathJax object the page gets (the configuration,
// then the one MathJax 3 builds at startup) a Hub whose Queue hands the
// nodes to MathJax 3's typesetPromise.  It must run before MathJax.
(function () {
  "use strict";
  function queue() {
    var nodes = [];
    for (var i = 0; i < arguments.length; i++) {
      var job = arguments[i];
      if (Array.isArray(job) && job[0] === "Typeset" && job[2]) {
        nodes.push(job[2]);
      }
    }
    var mj = window.MathJax;
    if (!nodes.length || !mj || !mj.startup) return;
    mj.startup.promise
      .then(function () { return mj.typesetPromise(nodes); })
      .catch(function (err) {
        console.error("MathJax could not typeset a widget label:", err);
      });
  }
  function withHub(mj) {
    if (mj && typeof mj === "object" && !mj.Hub) {
      mj.Hub = {Queue: queue};
    }
    return mj;
  }
  var current = withHub(window.MathJax);
  Object.defineProperty(window, "MathJax", {
    configurable: true,
    enumerable: true,
    get: function () { return current; },
    set: function (value) { current = withHub(value); },
  });
})();
