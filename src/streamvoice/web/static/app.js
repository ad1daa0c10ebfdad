// Streams one agent turn over SSE (POST /invocations) and plays PCM as it arrives, gaplessly:
// each chunk becomes an AudioBuffer scheduled to start exactly when the previous one ends.
// A conversation: the agent's id is kept and sent with each prompt. Sending while an answer plays
// interrupts it: the page stops its audio and says how much it played (played_ms); the agent answers
// what was heard, and keeps only that in the conversation.
"use strict";

const SAMPLE_RATE = 24000;
const stats = { interrupted: null, conversation: null, chunksScheduled: 0, samplesDecoded: 0, firstAudioMs: null, firstTextMs: null, heardMs: null, errors: [], done: false, marks: { text: 0, piece: 0, audio: 0 } };
window.streamvoiceStats = stats;

// One sample sentence per language, said by "Say a sample" in the chosen voice's language.
const SAMPLES = {
  "en-us": "Thanks for calling! Your table for four is booked for seven thirty tonight.",
  "en-gb": "Thanks for calling! Your table for four is booked for half past seven tonight.",
  "es": "¡Gracias por llamar! Su mesa para cuatro está reservada para esta noche.",
  "fr-fr": "Merci de votre appel ! Votre table pour quatre est réservée pour ce soir.",
  "hi": "कॉल करने के लिए धन्यवाद! आज रात के लिए आपकी मेज़ बुक हो गई है।",
  "it": "Grazie per la chiamata! Il suo tavolo per quattro è prenotato per stasera.",
  "ja": "お電話ありがとうございます。今夜七時半に四名様でご予約を承りました。",
  "pt-br": "Obrigado por ligar! Sua mesa para quatro está reservada para hoje à noite.",
  "cmn": "感谢您的来电！今晚七点半四位的座位已经为您预订好了。",
};
const voiceLang = {};

// The live timeline: marks placed by elapsed time, the scale growing with the turn.
const marks = [];
let span = 4000;
function place() {
  for (const m of marks) {
    m.el.style.left = `${(100 * m.start) / span}%`;
    if (m.width !== undefined) m.el.style.width = `${Math.max(0.3, (100 * m.width) / span)}%`;
  }
  const heard = $("heard");
  if (stats.heardMs !== null) {
    heard.style.display = "block";
    heard.style.left = `calc(7.5rem + (100% - 8rem) * ${stats.heardMs / span})`;
  }
  $("axis").textContent = `${(span / 1000).toFixed(1)} s`;
}
function mark(kind, startMs, widthMs, title) {
  const el = document.createElement("div");
  el.className = `mark ${kind}`;
  if (title) el.title = title;
  $(`lane-${kind}`).appendChild(el);
  marks.push({ el, start: startMs, width: widthMs });
  stats.marks[kind] += 1;
  while (startMs + (widthMs || 0) > span * 0.95) span *= 1.5;
  place();
}
function clearTimeline() {
  for (const m of marks) m.el.remove();
  marks.length = 0; span = 4000; $("heard").style.display = "none";
  stats.marks = { text: 0, piece: 0, audio: 0 };
}

let audioCtx = null;
let playhead = 0;
let sources = []; // the current answer's buffers: [node, start, duration] in the context's seconds
let turn = 0; // the turn whose audio plays; a stale stream's events are not played
let conversation = null;
let lastAnswer = null; // the history line of this turn's answer, once it ended
let cutLine = null; // the previous answer's line: replaced by what was heard if this prompt cut it
let youLine = null; // the line of the prompt being answered

function playedMs() {
  // what the player has played of the current answer: each buffer's part before now
  if (!audioCtx) return 0;
  const now = audioCtx.currentTime;
  let ms = 0;
  for (const [, start, dur] of sources) ms += Math.min(Math.max(now - start, 0), dur) * 1000;
  return Math.round(ms);
}
function stopAudio() {
  for (const [node] of sources) { try { node.stop(); } catch (e) { /* not started */ } }
  sources = []; playhead = 0;
}
function showCut(cut) {
  // the interrupted answer: what was heard, and what was not (struck through)
  stats.interrupted = cut;
  const el = document.createElement("div");
  el.className = "turn";
  const heard = document.createElement("span"); heard.className = "heard"; heard.textContent = cut.heard;
  const unheard = document.createElement("span"); unheard.className = "unheard"; unheard.textContent = cut.unheard;
  el.append("Agent (cut off at ", `${(cut.played_ms / 1000).toFixed(1)} s): `, heard, " ", unheard);
  if (cutLine) cutLine.remove();
  cutLine = null;
  $("history").insertBefore(el, youLine); // before the prompt that interrupted it
}
function showTurn(who, text) {
  const el = document.createElement("div");
  el.className = "turn";
  el.textContent = `${who}: ${text}`;
  $("history").appendChild(el);
  return el;
}
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
  sources.push([src, playhead, buffer.duration]);
  const startsInMs = (playhead - audioCtx.currentTime) * 1000;
  playhead += buffer.duration;
  stats.chunksScheduled += 1;
  stats.samplesDecoded += n;
  $("chunks").textContent = String(stats.chunksScheduled);
  return { startsInMs, durationMs: buffer.duration * 1000 };
}

function handle(event, t0, mine) {
  const elapsed = Math.round(performance.now() - t0);
  if (mine !== turn) return; // an interrupted answer's last events: the new turn says what was heard
  switch (event.type) {
    case "conversation":
      conversation = event.id; stats.conversation = event.id;
      if (event.interrupted) showCut(event.interrupted);
      $("conversation").textContent = `conversation ${event.id.slice(0, 8)}…`;
      break;
    case "interrupted":
      youLine = null; showCut(event);
      break;
    case "text_delta":
      if (stats.firstTextMs === null) { stats.firstTextMs = elapsed; $("first-text").textContent = String(elapsed); }
      $("answer").textContent += event.text;
      mark("text", elapsed, undefined, event.text);
      break;
    case "speech_piece":
      mark("piece", elapsed, undefined, event.text);
      break;
    case "audio_chunk": {
      const played = schedulePcm(b64ToBytes(event.data));
      if (stats.firstAudioMs === null) { stats.firstAudioMs = elapsed; $("first-audio").textContent = String(elapsed); }
      if (played) {
        if (stats.heardMs === null) stats.heardMs = Math.round(elapsed + played.startsInMs);
        mark("audio", elapsed + played.startsInMs, played.durationMs);
      }
      break;
    }
    case "error":
      stats.errors.push(event.code);
      $("status").textContent = "Error: " + event.message;
      $("status").className = "error";
      break;
    case "agent_end":
      lastAnswer = showTurn("Agent", event.text);
      $("total").textContent = String(elapsed);
      $("status").textContent = `Done: ${event.pieces} pieces, server-side first audio ${event.time_to_first_audio_ms} ms`;
      break;
  }
}

async function ask(prompt, mode) {
  audioCtx = audioCtx || new AudioContext({ sampleRate: SAMPLE_RATE });
  await audioCtx.resume();
  const played = sources.length ? playedMs() : null; // an answer was playing: this prompt interrupts it
  stopAudio();
  const mine = ++turn;
  cutLine = lastAnswer; lastAnswer = null;
  youLine = showTurn("You", prompt);
  Object.assign(stats, { chunksScheduled: 0, samplesDecoded: 0, firstAudioMs: null, firstTextMs: null, heardMs: null, errors: [], done: false, voice: $("voice").value });
  clearTimeline();
  carry = new Uint8Array(0);
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
    body: JSON.stringify({ prompt, mode, voice: $("voice").value, conversation, played_ms: played }),
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
      if (data) handle(JSON.parse(data), t0, mine);
    }
  }
}

function authHeaders() {
  const token = $("token").value.trim();
  return token ? { authorization: `Bearer ${token}` } : {};
}

// Every installed voice, grouped by language (the agent relays the speech server's list).
async function loadVoices() {
  const resp = await fetch("/voices", { headers: authHeaders() });
  if (!resp.ok) return;
  const { voices } = await resp.json();
  const select = $("voice");
  const chosen = select.value;
  select.textContent = "";
  const groups = {};
  for (const v of voices) {
    if (v.installed === false) continue;
    voiceLang[v.id] = v.language;
    const label = v.language_name || v.language;
    if (!groups[label]) { groups[label] = document.createElement("optgroup"); groups[label].label = label; select.appendChild(groups[label]); }
    const option = document.createElement("option");
    option.value = v.id; option.textContent = `${v.id} (${v.gender})`;
    groups[label].appendChild(option);
  }
  select.value = voiceLang[chosen] ? chosen : "af_heart";
  window.streamvoiceVoices = Object.keys(voiceLang).length;
}
window.addEventListener("DOMContentLoaded", () => { loadVoices().catch(() => {}); });
$("token").addEventListener("change", () => { loadVoices().catch(() => {}); });

async function run(prompt, mode) {
  // Speak stays enabled: a prompt while the answer plays interrupts it.
  $("sample").disabled = true;
  try {
    await ask(prompt, mode);
  } catch (err) {
    stats.errors.push("client");
    $("status").textContent = "Error: " + err.message;
    $("status").className = "error";
  } finally {
    stats.done = true;
    $("sample").disabled = false;
  }
}

$("ask").addEventListener("submit", (e) => { e.preventDefault(); run($("prompt").value, $("mode").value); });
$("sample").addEventListener("click", () => {
  const sample = SAMPLES[voiceLang[$("voice").value] || "en-us"] || SAMPLES["en-us"];
  $("prompt").value = sample;
  run(sample, "say");
});
$("new").addEventListener("click", () => {
  stopAudio(); turn += 1; conversation = null; stats.conversation = null;
  $("history").textContent = ""; $("conversation").textContent = "new conversation";
  lastAnswer = null; cutLine = null; youLine = null;
});
