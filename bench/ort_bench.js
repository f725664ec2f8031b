// bench/ort_bench.js — the ONNX Runtime side of bench/compare.sh: a worker that times
// InferenceSession.run (npm onnxruntime-node, CPU execution provider) for bench/compare.py.
//
// usage: node bench/ort_bench.js ONNXRUNTIME_NODE_DIR
// Reads one JSON task per line on stdin:
//   {"onnx": PATH, "threads": T, "steps": N, "warmup": W, "input": NAME, "pool": POOL.npy,
//    "shape": [batch dims...], "ftz": false}
// POOL.npy holds P float32 batches back to back; call i feeds batch i % P. The session is made
// with intraOpNumThreads T, interOpNumThreads 1, sequential execution and every graph
// optimisation; W untimed calls, then N timed ones (wall clock). Answers one JSON line per task
// on stdout: {"ms_per_step": M} or {"error": TEXT}. Exits at the end of stdin.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');

const ort = require(path.resolve(process.argv[2]));

// The float32 payload of a .npy file (versions 1-3, little-endian, C order).
function readNpy(file) {
  const buf = fs.readFileSync(file);
  if (buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${file}: not a .npy file`);
  const hlen = buf[6] === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const off = (buf[6] === 1 ? 10 : 12) + hlen;
  const header = buf.toString('latin1', buf[6] === 1 ? 10 : 12, off);
  if (!header.includes("'<f4'")) throw new Error(`${file}: float32 expected (${header.trim()})`);
  const bytes = buf.subarray(off);
  const out = new Float32Array(bytes.length / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

async function runTask(t) {
  const opts = {
    intraOpNumThreads: t.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  };
  if (t.ftz) opts.extra = {session: {set_denormal_as_zero: '1'}};
  const session = await ort.InferenceSession.create(t.onnx, opts);
  const pool = readNpy(t.pool);
  const per = t.shape.reduce((a, b) => a * b, 1);
  const n = Math.floor(pool.length / per);
  if (n < 1 || n * per !== pool.length) throw new Error(`${t.pool}: not whole batches of ${per}`);
  const feeds = [];
  for (let i = 0; i < n; i++) {
    feeds.push({[t.input]: new ort.Tensor('float32', pool.subarray(i * per, (i + 1) * per), t.shape)});
  }
  let t0 = 0n;
  for (let i = 0; i < t.warmup + t.steps; i++) {
    if (i === t.warmup) t0 = process.hrtime.bigint();
    await session.run(feeds[i % n]);
  }
  const ns = Number(process.hrtime.bigint() - t0);
  await session.release();
  return {ms_per_step: ns / 1e6 / t.steps};
}

async function main() {
  const rl = readline.createInterface({input: process.stdin, terminal: false});
  for await (const line of rl) {
    if (!line.trim()) continue;
    let answer;
    try {
      answer = await runTask(JSON.parse(line));
    } catch (e) {
      answer = {error: String(e && e.message ? e.message : e)};
    }
    process.stdout.write(JSON.stringify(answer) + '\n');
  }
}

main();
