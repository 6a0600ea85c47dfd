// A classic script, run before the modules load: a deep link to a unit starts fetching its
// session's units at once (api.js picks the answer up), so the first unit shows sooner.
// It also records Content-Security-Policy violations (window.sgViolations), which the
// browser tests check are none.
document.addEventListener('securitypolicyviolation', (e) => {
  window.sgViolations = [...(window.sgViolations || []), `${e.violatedDirective} ${e.blockedURI}`];
});
(() => {
  const m = /^\/label\/([^/]+)/.exec(location.pathname);
  const key = sessionStorage.getItem('sg.key');
  const meta = document.querySelector('meta[name="sg-api-key"]');
  // Without the key a server that wants one has, nothing is asked of it (a 401 helps nobody).
  if (!m || (meta && meta.content === 'required' && !key)) return;
  const headers = { Accept: 'application/json' };
  if (key) headers.Authorization = `Bearer ${key}`;
  const path = `/api/graph/${encodeURIComponent(decodeURIComponent(m[1]))}/annotations?include_sidechains=true`;
  window.sgEarly = { [path]: fetch(path, { headers }) };
})();
