// The site's search, run in the page itself: no web worker and no XMLHttpRequest, which a
// browser refuses for a page opened from disk (file://). tools/mkdocs_offline_search.py puts
// this file in place of the search plugin's search/main.js and writes the index as a script
// (search/search_index.js). Same input box, same results list, same ?q= as mkdocs' own.
(function () {
  var index = null;
  var documents = {};
  var minLength = 3;

  function joinUrl(base, path) {
    if (path.charAt(0) === "/") return path;
    return base.charAt(base.length - 1) === "/" ? base + path : base + "/" + path;
  }

  function escapeHtml(value) {
    return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;")
      .replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function loadScript(path, done) {
    var script = document.createElement("script");
    script.src = joinUrl(base_url, path);
    script.onload = done;
    script.onerror = function () { console.error("search: could not load " + path); };
    document.head.appendChild(script);
  }

  function search(query) {
    var hits;
    try {
      hits = index.search(query);
    } catch (err) {  // lunr's query syntax ("a:", "~"): no results rather than an error
      return [];
    }
    return hits.map(function (hit) { return documents[hit.ref]; });
  }

  function show(results) {
    var box = document.getElementById("mkdocs-search-results");
    while (box.firstChild) box.removeChild(box.firstChild);
    if (!results.length) {
      var none = box.getAttribute("data-no-results-text") || "No results found";
      box.insertAdjacentHTML("beforeend", "<p>" + escapeHtml(none) + "</p>");
      return;
    }
    results.forEach(function (doc) {
      box.insertAdjacentHTML("beforeend",
        '<article><h3><a href="' + joinUrl(base_url, doc.location) + '">' +
        escapeHtml(doc.title) + "</a></h3><p>" + escapeHtml(doc.text.substring(0, 200)) +
        "</p></article>");
    });
  }

  function onInput() {
    var query = document.getElementById("mkdocs-search-query").value;
    show(query.length >= minLength ? search(query) : []);
  }

  function ready() {
    var data = window.sadl_search_index;
    var config = data.config || {};
    if (config.separator) lunr.tokenizer.separator = new RegExp(config.separator);
    if (config.min_search_length) minLength = config.min_search_length;
    index = lunr(function () {
      this.field("title");
      this.field("text");
      this.ref("location");
      data.docs.forEach(function (doc) {
        this.add(doc);
        documents[doc.location] = doc;
      }, this);
    });
    var input = document.getElementById("mkdocs-search-query");
    if (!input) return;
    input.addEventListener("input", onInput);
    var term = new URLSearchParams(window.location.search).get("q");
    if (term) input.value = term;
    if (input.value) onInput();  // typed (or given as ?q=) before the index was ready
  }

  loadScript("search/lunr.js", function () { loadScript("search/search_index.js", ready); });
})();
