// One origin for CommuGraph's frontend: `/api/*` goes to sessiongraph, everything else to
// CommuGraph's own Next.js server (its pages, scripts and sample files). Its frontend calls
// the API by relative URL (`fetch('/api/...')`), so this is how it reaches us without any
// change to its source. Every request is logged, one JSON line each, and an API answer of
// 400 or more is logged with its body.
//
// --graph-view: in the answer to POST /api/upload only, `"framework":"claudecode"` becomes
// `"framework":"claudecode-graph"`. CommuGraph's frontend draws its node-link graph view
// only when the framework is not exactly `claudecode` (MainLayout.tsx); for `claudecode` it
// shows its workflow and dialog views. Nothing else is changed, and no other answer.
//
// node proxy.mjs --listen 127.0.0.1:3300 --api 127.0.0.1:18080 --ui 127.0.0.1:3000 \
//   [--graph-view] [--log FILE]
import http from 'node:http';
import fs from 'node:fs';

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const hostPort = (s) => {
  const i = s.lastIndexOf(':');
  return { host: s.slice(0, i), port: Number(s.slice(i + 1)) };
};
const listen = hostPort(opt('--listen', '127.0.0.1:3300'));
const api = hostPort(opt('--api', '127.0.0.1:18080'));
const ui = hostPort(opt('--ui', '127.0.0.1:3000'));
const graphView = args.includes('--graph-view');
const logFile = opt('--log', null);

function log(entry) {
  const line = JSON.stringify({ t: new Date().toISOString(), ...entry });
  if (logFile) fs.appendFileSync(logFile, line + '\n');
  else console.log(line);
}

http
  .createServer((req, res) => {
    const start = Date.now();
    const isApi = req.url === '/api' || req.url.startsWith('/api/');
    const target = isApi ? api : ui;
    const headers = { ...req.headers, host: `${target.host}:${target.port}` };
    // API answers uncompressed, so that they can be logged (and rewritten).
    if (isApi) delete headers['accept-encoding'];
    const upstream = http.request(
      { host: target.host, port: target.port, method: req.method, path: req.url, headers },
      (up) => {
        const rewrite =
          graphView && isApi && req.method === 'POST' && req.url.split('?')[0] === '/api/upload';
        if (!isApi) {
          res.writeHead(up.statusCode, up.headers);
          up.pipe(res);
          up.on('end', () =>
            log({ side: 'ui', method: req.method, url: req.url, status: up.statusCode, ms: Date.now() - start }),
          );
          return;
        }
        const chunks = [];
        up.on('data', (c) => chunks.push(c));
        up.on('end', () => {
          let body = Buffer.concat(chunks);
          let rewritten = false;
          if (rewrite && up.statusCode === 200) {
            const text = body.toString('utf8');
            const next = text.replace('"framework":"claudecode"', '"framework":"claudecode-graph"');
            rewritten = next !== text;
            body = Buffer.from(next, 'utf8');
          }
          const headers = { ...up.headers };
          delete headers['transfer-encoding'];
          headers['content-length'] = String(body.length);
          res.writeHead(up.statusCode, headers);
          res.end(body);
          const entry = {
            side: 'api',
            method: req.method,
            url: req.url,
            status: up.statusCode,
            bytes: body.length,
            ms: Date.now() - start,
          };
          if (rewritten) entry.rewritten = 'framework claudecode -> claudecode-graph';
          if (up.statusCode >= 400 || req.method !== 'GET') entry.body = body.toString('utf8').slice(0, 2000);
          log(entry);
        });
      },
    );
    upstream.on('error', (e) => {
      log({ side: isApi ? 'api' : 'ui', method: req.method, url: req.url, error: String(e) });
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('proxy: upstream unreachable\n');
    });
    req.pipe(upstream);
  })
  .listen(listen.port, listen.host, () =>
    log({ listening: `${listen.host}:${listen.port}`, api: `${api.host}:${api.port}`, ui: `${ui.host}:${ui.port}`, graphView }),
  );
