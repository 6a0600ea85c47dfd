// Drives CommuGraph's frontend in headless Chromium as a user would: opens the page, picks the
// session's files in its upload dialog, presses "Process & Launch", then moves its timeline
// slider and takes screenshots.
//
// node shoot.mjs --url http://127.0.0.1:3300/ --files DIR --out DIR [--mode graph|workflow]
//   [--chromium /usr/bin/chromium] [--mid-fraction 0.2]
//
// graph mode (the proxy runs with --graph-view): the node-link graph at the last step
// (graph.png) and at an intermediate step (graph-step.png).
// workflow mode (the proxy passes everything unchanged): CommuGraph's own Claude Code views,
// the dialog view (dialog.png) and the workflow view at the last step (workflow.png).
//
// Needs playwright-core (npm) where Node finds it, e.g. NODE_PATH=<dir>/node_modules.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
let chromium;
try {
  ({ chromium } = require('playwright-core'));
} catch {
  ({ chromium } = require(path.join(process.env.NODE_PATH || '', 'playwright-core')));
}

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const url = opt('--url', 'http://127.0.0.1:3300/');
const filesDir = opt('--files');
const outDir = opt('--out', '.');
const mode = opt('--mode', 'graph');
const executablePath = opt('--chromium', '/usr/bin/chromium');
const midFraction = Number(opt('--mid-fraction', '0.2'));
const width = Number(opt('--width', '1600'));
const height = Number(opt('--height', '1000'));

const files = fs
  .readdirSync(filesDir)
  .filter((f) => f.endsWith('.jsonl'))
  .map((f) => path.join(filesDir, f));
fs.mkdirSync(outDir, { recursive: true });

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: { width, height } });
const problems = [];
page.on('console', (m) => {
  if (m.type() === 'error' || m.type() === 'warning') problems.push(`console.${m.type()}: ${m.text()}`);
});
page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
page.on('response', (r) => {
  if (r.url().includes('/api/') && r.status() >= 400) problems.push(`HTTP ${r.status()} ${r.request().method()} ${r.url()}`);
});

async function settle() {
  await page.waitForLoadState('networkidle');
  await page.waitForTimeout(800);
}

await page.goto(url, { waitUntil: 'networkidle' });
// The upload dialog opens by itself; Claude Code is its default framework.
await page.locator('input#file').setInputFiles(files);
const uploaded = page.waitForResponse((r) => r.url().endsWith('/api/upload') && r.request().method() === 'POST');
await page.getByRole('button', { name: 'Process & Launch' }).click();
const upload = await uploaded;
console.log(`upload: HTTP ${upload.status()} ${await upload.text().catch((e) => `(body not readable: ${e.message.split('\n')[0]})`)}`);
await page.getByRole('dialog').waitFor({ state: 'hidden' });
await settle();

// The step slider (Radix): Home/End, PageUp = 10 steps, arrows = 1 step.
const slider = page.getByRole('slider').first();
async function stepTo(target) {
  await slider.focus();
  await page.keyboard.press('Home');
  for (let i = 0; i < Math.floor(target / 10); i++) await page.keyboard.press('PageUp');
  for (let i = 0; i < target % 10; i++) await page.keyboard.press('ArrowRight');
  await settle();
}
async function stepToEnd() {
  await slider.focus();
  await page.keyboard.press('End');
  await settle();
}
const stepLabel = async () => (await page.getByText(/^Step \d+ \/ \d+$/).first().textContent()).trim();

if (mode === 'graph') {
  // The timeline starts at step 0; the session's first interaction comes a few steps later.
  await stepToEnd();
  await page.locator('.react-flow__edge').first().waitFor();
  const nodes = await page.locator('.react-flow__node').allTextContents();
  const edges = await page.locator('.react-flow__edge').count();
  console.log(`graph, ${await stepLabel()}: ${nodes.length} nodes, ${edges} edges drawn`);
  console.log(`  nodes: ${JSON.stringify(nodes.map((t) => t.slice(0, 40)))}`);
  await page.screenshot({ path: path.join(outDir, 'graph.png') });

  const max = Number(await slider.getAttribute('aria-valuemax'));
  await stepTo(Math.round(max * midFraction));
  await page.locator('.react-flow__node').first().waitFor();
  const midEdges = await page.locator('.react-flow__edge').count();
  console.log(`graph, ${await stepLabel()}: ${midEdges} edges drawn`);
  await page.screenshot({ path: path.join(outDir, 'graph-step.png') });

  // Back to the last step; a double click on a node is CommuGraph's "focus": that node's
  // outgoing edges are drawn in its colour.
  await stepToEnd();
  await page.locator('.react-flow__controls-fitview').click();
  await page.waitForTimeout(500);
  await page.locator('.react-flow__node').filter({ hasText: /^assistant/ }).dblclick({ position: { x: 30, y: 20 } });
  await page.waitForTimeout(800);
  console.log(`graph, ${await stepLabel()}, assistant focused`);
  await page.screenshot({ path: path.join(outDir, 'graph-focus.png') });
} else {
  await page.screenshot({ path: path.join(outDir, 'dialog.png') });
  await page.getByRole('button', { name: 'Workflow' }).click();
  await settle();
  await stepToEnd();
  console.log(`workflow, ${await stepLabel()}: ${await page.locator('.react-flow__node').count()} nodes drawn`);
  await page.screenshot({ path: path.join(outDir, 'workflow.png') });
}

// CommuGraph's own error messages (GraphView, WorkflowViewWrapper, AnnotationViewWrapper,
// PreFlightModal); matched whole, so that chat text quoting them does not count.
const errorText = await page.getByText(/^(Error loading (graph|dialog|workflow)|Error: .*)$/).count();
if (errorText > 0) problems.push(`the page shows ${errorText} error message(s)`);
console.log(problems.length ? `problems:\n  ${problems.join('\n  ')}` : 'problems: none');
await browser.close();
