/* traceadvisor: collect script errors and blocked loads from the very start, for the status marker below. */
window.__ta = { errors: [] };
window.addEventListener("error", function (e) { window.__ta.errors.push(String(e.message || e.type)); });
window.addEventListener("unhandledrejection", function (e) { window.__ta.errors.push("unhandled: " + String(e.reason)); });
document.addEventListener("securitypolicyviolation", function (e) {
  window.__ta.errors.push("blocked by CSP: " + e.violatedDirective + " " + e.blockedURI);
});
