/* traceadvisor: collect script errors and blocked loads from the very start; the status marker shows them. */
window.__ta = { errors: [], update: null };
window.__ta.fail = function (msg) {
  window.__ta.errors.push(String(msg));
  if (window.__ta.update) window.__ta.update();
};
window.addEventListener("error", function (e) { window.__ta.fail(e.message || e.type); });
window.addEventListener("unhandledrejection", function (e) { window.__ta.fail("unhandled: " + e.reason); });
document.addEventListener("securitypolicyviolation", function (e) {
  window.__ta.fail("blocked by CSP: " + e.violatedDirective + " " + e.blockedURI);
});
