// Streams one agent turn over SSE (POST /invocations) and plays PCM as it arrives, gaplessly:
// each chunk becomes an AudioBuffer scheduled to start exactly when the previous one ends.
"use strict";

const SAMPLE_RATE = 24000;
const stats = { chunksScheduled: 0, samplesDecoded: 0, firstAudioMs: null, firstTextMs: null, errors: [], done: false };
window.streamvoiceStats = stats;

let audioCtx = null;
let playhead = 0;
let carry = new Uint8Array(0); // an odd trailing byte waits for its partner (s16le samples are 2 bytes)

function $(id) { return document.getElementById(id); }
window.addEventListener("DOMContentLoaded", () => { $("token").value = sessionStorage.getItem("streamvoice-token") || ""; });

function b64ToBytes(b64) {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function schedulePcm(bytes) {
  const joined = new Uint8Array(carry.length + bytes.length);
  joined.set(carry); joined.set(bytes, carry.length);
  const usable = joined.length - (joined.length % 2);
  carry = joined.slice(usable);
  if (usable === 0) return;
  const view = new DataView(joined.buffer, 0, usable);
  const n = usable / 2;
  const buffer = audioCtx.createBuffer(1, n, SAMPLE_RATE);
  const ch = buffer.getChannelData(0);
  for (let i = 0; i < n; i++) ch[i] = view.getInt16(i * 2, true) / 32768;
  const src = audioCtx.createBufferSource();
  src.buffer = buffer;
  src.connect(audioCtx.destination);
  playhead = Math.max(playhead, audioCtx.currentTime + 0.02);
  src.start(playhead);
  playhead += buffer.duration;
  stats.chunksScheduled += 1;
  stats.samplesDecoded += n;
  $("chunks").textContent = String(stats.chunksScheduled);
}

function handle(event, t0) {
  const elapsed = Math.round(performance.now() - t0);
  switch (event.type) {
    case "text_delta":
      if (stats.firstTextMs === null) { stats.firstTextMs = elapsed; $("first-text").textContent = String(elapsed); }
      $("answer").textContent += event.text;
      break;
    case "audio_chunk":
      schedulePcm(b64ToBytes(event.data));
      if (stats.firstAudioMs === null) { stats.firstAudioMs = elapsed; $("first-audio").textContent = String(elapsed); }
      break;
    case "error":
      stats.errors.push(event.code);
      $("status").textContent = "Error: " + event.message;
      $("status").className = "error";
      break;
    case "agent_end":
      $("total").textContent = String(elapsed);
      $("status").textContent = `Done: ${event.pieces} pieces, server-side first audio ${event.time_to_first_audio_ms} ms`;
      break;
  }
}

async function ask(prompt, mode) {
  audioCtx = audioCtx || new AudioContext({ sampleRate: SAMPLE_RATE });
  await audioCtx.resume();
  Object.assign(stats, { chunksScheduled: 0, samplesDecoded: 0, firstAudioMs: null, firstTextMs: null, errors: [], done: false });
  playhead = 0; carry = new Uint8Array(0);
  for (const id of ["first-text", "first-audio", "total"]) $(id).textContent = "–";
  $("answer").textContent = ""; $("status").textContent = "Thinking…"; $("status").className = "";
  const t0 = performance.now();
  // The token stays in this tab (sessionStorage) and travels only as an Authorization header.
  const token = $("token").value.trim();
  sessionStorage.setItem("streamvoice-token", token);
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  const resp = await fetch("/invocations", {
    method: "POST",
    headers,
    body: JSON.stringify({ prompt, mode }),
  });
  if (!resp.ok) {
    const body = await resp.json().catch(() => ({}));
    throw new Error((body.error && body.error.message) || `HTTP ${resp.status}`);
  }
  // SSE over fetch: buffer bytes and act only on complete events (a blank line ends one).
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) handle(JSON.parse(data), t0);
    }
  }
}

$("ask").addEventListener("submit", async (e) => {
  e.preventDefault();
  $("go").disabled = true;
  try {
    await ask($("prompt").value, $("mode").value);
  } catch (err) {
    stats.errors.push("client");
    $("status").textContent = "Error: " + err.message;
    $("status").className = "error";
  } finally {
    stats.done = true;
    $("go").disabled = false;
  }
});
