// The Olares market source as a Cloudflare Worker: `olarespack export cloudflare` copies this file next to
// market.json and the static assets it wrote from a published market folder.
//
// It answers what `olarespack serve` (src/olarespack/market/serve.py) answers, byte for byte. Everything
// that can be decided at export time was decided there, in Python, by serve's own code: market.json holds
// serve's route table (the patterns Starlette compiled, its methods, its endpoints), `answers`, the table
// serve reads too (market/answers.py: statuses, headers, error texts, limits, the Olares versions that
// pick a generation), the chart and icon indexes and the /health answer; assets/answers/<generation>-
// <digest>.json holds the hash and info answers without their `version` member and every detail entry,
// each already serialized by the code serve uses. What is left here is HTTP glue: routing as Starlette
// routes (404, 405, trailing-slash redirects), reading the POST body, filling the table's templates, and
// Python's text forms (repr, ASCII JSON) the templates ask for. Each mirrors the serve.py function named
// beside it; the tests run both on the same requests and compare status, headers and bytes.

import MARKET from "./market.json";

const ANSWERS = MARKET.answers;
const CORS = ANSWERS.cors;
const GENERATIONS = new Map(Object.entries(MARKET.generations).map(([name, g]) => [name, {
  ...g, charts: new Map(Object.entries(g.charts)), latest: new Map(Object.entries(g.latest)),
}]));
const ICONS = new Map(Object.entries(MARKET.icons));
const ROUTES = compile(MARKET.routes);
// Any origin: assets are only read through the binding, this host name never leaves the Worker.
const ASSET_ORIGIN = "https://assets.invalid";

class HttpError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
    this.detail = detail;
  }
}

// answers.failure: one error answer of the table, its text filled
function failure(key, values = {}) {
  const found = ANSWERS.failures[key];
  return new HttpError(found.status, fill(found.text, values));
}

// answers.fill: {name} the value as text, {name:r} its repr(), {name:r40} the repr() of its first 40 characters
const PLACEHOLDER = new RegExp(ANSWERS.placeholder, "g");

function fill(template, values) {
  return template.replace(PLACEHOLDER, (_, name, asRepr, count) => {
    if (!Object.hasOwn(values, name)) throw new Error(`no value for {${name}}`);
    const text = String(values[name]);
    if (!asRepr) return text;
    return pyRepr(count ? head(text, Number(count)) : text);
  });
}

export default {
  async fetch(request, env) {
    try {
      // serve's AccessLogAndCors answers every preflight before routing, whatever the path
      if (request.method === "OPTIONS") return withCors(new Response(null, { status: ANSWERS.preflight_status }));
      return withCors(await route(request, env));
    } catch (error) {
      const known = error instanceof HttpError ? error : failure("internal");
      if (known !== error) console.error("unexpected exception", error && error.stack); // logged, never sent
      return withCors(json(errorBody(known.detail), known.status));
    }
  },
};

// --------------------------------------------------------------------------- routing (Starlette's Router)

function compile(routes) {
  return routes.map((r) => ({ ...r, regex: new RegExp(r.pattern), routes: r.routes && compile(r.routes) }));
}

// The decoded path as uvicorn puts it in scope["path"]: percent-escapes (%2F too) decoded as UTF-8,
// invalid sequences replaced, never `+`.
function decodePath(raw) {
  const bytes = [];
  const encoder = new TextEncoder();
  for (let i = 0; i < raw.length; i++) {
    const hex = raw.slice(i + 1, i + 3);
    if (raw[i] === "%" && /^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(parseInt(hex, 16));
      i += 2;
    } else {
      const end = raw.codePointAt(i) > 0xffff ? i + 2 : i + 1;
      bytes.push(...encoder.encode(raw.slice(i, end)));
      i = end - 1;
    }
  }
  return new TextDecoder("utf-8").decode(new Uint8Array(bytes));
}

function routePath(path, root) {  // starlette._utils.get_route_path
  if (!root || !path.startsWith(root)) return path;
  if (path === root) return "";
  return path[root.length] === "/" ? path.slice(root.length) : path;
}

// One route's match: ["full" | "partial" | null, params, the mount's root path]
function matchRoute(r, path, root, method) {
  const found = r.regex.exec(routePath(path, root));
  if (!found) return [null];
  const params = { ...found.groups };
  if (r.routes) {  // Mount.matches: the rest of the path goes to the mount's own router
    const remaining = "/" + params.path;
    const own = routePath(path, root);
    return ["full", params, root + own.slice(0, own.length - remaining.length)];
  }
  return [r.methods.includes(method) ? "full" : "partial", params, root];
}

async function dispatch(routes, ctx, path, root, pinned) {  // Router.app
  let partial = null;
  for (const r of routes) {
    const [kind, params, childRoot] = matchRoute(r, path, root, ctx.method);
    if (kind === "full") {
      if (r.routes) return dispatch(r.routes, ctx, path, childRoot, r.pinned);
      return ENDPOINTS[r.endpoint](ctx, params, pinned);
    }
    if (kind === "partial" && partial === null) partial = r;
  }
  if (partial !== null) throw failure("bad_method");
  const own = routePath(path, root);
  if (own !== "/") {  // redirect_slashes: the path with its trailing slash toggled, when a route takes it
    const other = own.endsWith("/") ? path.replace(/\/+$/, "") : path + "/";
    if (routes.some((r) => matchRoute(r, other, root, ctx.method)[0] !== null)) return redirect(ctx, other);
  }
  throw failure("no_route");
}

async function route(request, env) {
  const url = new URL(request.url);
  const ctx = { request, env, url, method: request.method, query: url.searchParams };
  return dispatch(ROUTES, ctx, decodePath(url.pathname), "", null);
}

function redirect(ctx, path) {  // RedirectResponse(URL(scope=redirect_scope)), quoted as Starlette quotes it
  const host = ctx.request.headers.get("host") || ctx.url.host;
  const query = ctx.url.search.slice(1);
  const target = `${ctx.url.protocol}//${host}${path}` + (query ? `?${query}` : "");
  return new Response(null, { status: 307, headers: { location: quote(target, ":/%#?=@[]!$&'()*+,;") } });
}

// --------------------------------------------------------------------------- endpoints (serve.Api)

// Starlette's QueryParams.get: the last value of a repeated name
function queryParam(ctx, name) {
  const all = ctx.query.getAll(name);
  return all.length ? all[all.length - 1] : null;
}

// answers.olares_generation: the last generation whose first release the version has reached, by the
// table's grammar and floors; a prerelease sorts before its release, build data does not count.
const OLARES = ANSWERS.olares_version;
const OLARES_VERSION = new RegExp(`^(?:${OLARES.pattern})$`);

function olaresGeneration(version) {
  if ([...version].length > OLARES.max_length) return null;
  const m = OLARES_VERSION.exec(version);
  if (!m) return null;
  const release = [m[1], m[2] || "0", m[3] || "0"].map(BigInt);  // BigInt: Python's ints have no bound
  const reached = (floor) => {
    for (let i = 0; i < 3; i++) if (release[i] !== BigInt(floor[i])) return release[i] > BigInt(floor[i]);
    return m[4] === undefined;
  };
  let found = null;
  for (const [floor, name] of OLARES.floors) if (reached(floor)) found = name;
  return found;
}

// answers.whole_number: a page or size parameter, the whole string a number from low to high, else null
const WHOLE_NUMBER = new RegExp(`^(?:${ANSWERS.whole_number})$`);

function wholeNumber(text, low, high) {
  if (!WHOLE_NUMBER.test(text)) return null;
  const number = Number(text);
  return number >= low && number <= high ? number : null;
}

function view(version, pinned) {  // Api._view
  let generation = pinned || ANSWERS.default_generation;
  if (version) {
    const found = olaresGeneration(version);
    if (found === null) throw failure("bad_version", { version });
    generation = pinned || found;
  }
  const g = GENERATIONS.get(generation);
  if (!g) throw failure("no_generation", { generation });
  return [g, version || g.default_version];
}

const loaded = new Map();  // answer file -> its parsed content, once per isolate

function answers(ctx, g) {
  if (!loaded.has(g.answers)) {
    const load = asset(ctx, g.answers).then(async (r) => {
      if (r.status !== 200) throw new Error(`asset ${g.answers}: ${r.status}`);
      const data = await r.json();
      return { hash: data.hash, info: data.info, details: new Map(Object.entries(data.details)), v2: data.v2 };
    });
    load.catch(() => loaded.delete(g.answers));  // a failed read is retried by the next request
    loaded.set(g.answers, load);
  }
  return loaded.get(g.answers);
}

function versioned(rest, version) {  // v1.VersionedAnswer.render
  return ANSWERS.versioned_head + pyJsonAscii(version) + rest;
}

const ENDPOINTS = {
  async hash(ctx, params, pinned) {
    const [g, version] = view(queryParam(ctx, ANSWERS.query.version), pinned);
    return json(versioned((await answers(ctx, g)).hash, version));
  },

  async info(ctx, params, pinned) {
    const [g, version] = view(queryParam(ctx, ANSWERS.query.version), pinned);
    return json(versioned((await answers(ctx, g)).info, version));
  },

  async details(ctx, params, pinned) {
    const [ids, asked] = idsAndVersion(await body(ctx.request));
    const [g, version] = view(asked, pinned);
    const { details } = await answers(ctx, g);
    const apps = ids.filter((i) => details.has(i)).map((i) => pyJsonAscii(i) + ":" + details.get(i));
    const missing = ids.filter((i) => !details.has(i)).map(pyJsonAscii);
    const separators = ANSWERS.details_separators;  // answers.details_answer
    return json(fill(ANSWERS.details_answer, { apps: apps.join(separators.apps), version: pyJsonAscii(version),
      not_found: missing.join(separators.not_found) }));
  },

  async chart(ctx, params, pinned) {
    // a box sends the chart's own version here: only an Olares version picks a generation (see serve.py)
    const asked = queryParam(ctx, ANSWERS.query.version);
    const [g] = view(asked && olaresGeneration(asked) ? asked : null, pinned);
    const name = params.name;
    const fileName = queryParam(ctx, ANSWERS.query.file_name) || g.latest.get(name) || "";
    if (g.charts.get(fileName)?.owner !== name) throw failure("no_chart", { file_name: fileName, name });
    const found = await asset(ctx, g.charts.get(fileName).asset);
    if (found.status !== 200) throw failure("chart_gone", { file_name: fileName });
    const headers = Object.fromEntries(Object.entries(ANSWERS.chart_headers).map(
      ([header, value]) => [header, fill(value, { file_name: fileName })]));
    return new Response(found.body, { headers });
  },

  async icon(ctx, params) {
    const icon = ICONS.get(params.file);
    const found = icon && await asset(ctx, icon.asset);
    if (!found || found.status !== 200) throw failure("no_icon");
    return new Response(found.body, { headers: { "content-type": icon.type, "cache-control": ANSWERS.icon_cache } });
  },

  // 1.12.7's sync (market/v2.py): the probe, the taxonomy and the application list, per generation
  async v2Catalog(ctx, params, pinned) {
    const [g] = view(queryParam(ctx, ANSWERS.query.version), pinned);
    const asked = queryParam(ctx, ANSWERS.query.source_id);
    if (asked !== null && [...asked].length > ANSWERS.max_source_id) throw failure("bad_source_id");
    const { v2 } = await answers(ctx, g);  // answers.v2_catalog_answer
    return json(fill(ANSWERS.v2_catalog_answer, { ...v2.catalog, source_id: pyJsonAscii(asked || MARKET.source_id) }));
  },

  async v2Taxonomy(ctx, params, pinned) {
    const [g] = view(queryParam(ctx, ANSWERS.query.version), pinned);
    return json((await answers(ctx, g)).v2.taxonomy);
  },

  async v2Applications(ctx, params, pinned) {
    const [g] = view(queryParam(ctx, ANSWERS.query.version), pinned);
    const page = queryParam(ctx, ANSWERS.query.page);
    const size = queryParam(ctx, ANSWERS.query.size);
    const number = page === null ? 1 : wholeNumber(page, 1, ANSWERS.max_page);
    if (number === null) throw failure("bad_page", { page });
    const count = size === null ? 0 : wholeNumber(size, 0, ANSWERS.max_page_size);
    if (count === null) throw failure("bad_size", { size });
    const { v2 } = await answers(ctx, g);  // answers.v2_applications_answer
    const shown = count ? v2.items.slice((number - 1) * count, number * count) : v2.items;
    return json(fill(ANSWERS.v2_applications_answer, { items: shown.join(","), removed: v2.removed,
      has_more: count && number * count < v2.items.length ? "true" : "false", max_time: v2.max_time,
      total: v2.items.length, page: number, page_size: count || v2.items.length }));
  },

  // An export has no catalog to go stale: /health is always the answer serve gives a fresh catalog.
  async health() {
    return json(MARKET.health);
  },

  async alive() {
    return json(MARKET.health);
  },
};

function asset(ctx, path) {
  const encoded = path.split("/").map(encodeURIComponent).join("/");
  return ctx.env.ASSETS.fetch(new Request(`${ASSET_ORIGIN}/${encoded}`));
}

// --------------------------------------------------------------------------- the POST body (serve._body)

// Past the bound, the rest of the body is read and dropped before the 413 (memory stays bounded): a Worker
// that answers with part of the body unread has its answer lost by the platform's dev proxy ("Your worker
// restarted mid-request"), and Cloudflare itself bounds the body (100 MB) and the time it takes to send.
async function body(request) {
  const tooBig = failure("body_too_big");
  const declared = request.headers.get("content-length");
  if (declared !== null && (!/^[0-9]+$/.test(declared) || Number(declared) > ANSWERS.max_body)) {
    await discard(request.body);
    throw tooBig;
  }
  const chunks = [];
  let size = 0;
  if (request.body) {
    const reader = request.body.getReader();
    for (;;) {
      const { done, value } = await reader.read().catch(() => {
        // the body's framing broke mid-read (a malformed chunk): the request is bad, as serve's 400 says
        throw failure("body_malformed");
      });
      if (done) break;
      size += value.byteLength;
      if (size > ANSWERS.max_body) {
        reader.releaseLock();
        await discard(request.body);
        throw tooBig;
      }
      chunks.push(value);
    }
  }
  const data = new Uint8Array(size);
  let at = 0;
  for (const chunk of chunks) {
    data.set(chunk, at);
    at += chunk.byteLength;
  }
  return data;
}

async function discard(stream) {
  if (stream) await stream.pipeTo(new WritableStream()).catch(() => {});
}

function idsAndVersion(data) {  // serve._ids_and_version
  let payload;
  try {
    // fatal: bytes that are not UTF-8 are "not JSON", as Python's json.loads finds; the BOM is skipped by both
    payload = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(data));
  } catch {
    throw failure("not_json");
  }
  if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw failure("not_object");
  const ids = Object.hasOwn(payload, "app_ids") ? payload.app_ids : null;
  if (!Array.isArray(ids) || !ids.every((i) => typeof i === "string")) throw failure("bad_ids");
  if (ids.length > ANSWERS.max_ids) throw failure("too_many_ids", { count: ids.length });
  const version = Object.hasOwn(payload, "version") ? payload.version : null;
  if (version !== null && typeof version !== "string") throw failure("bad_version_type");
  return [[...new Set(ids)], version || null];
}

// --------------------------------------------------------------------------- Python's text forms

function json(text, status = 200) {
  return new Response(text, { status, headers: { "content-type": ANSWERS.json_type } });
}

// served_json({"error": detail}): JSON.stringify writes a string as json.dumps(ensure_ascii=False) does
function errorBody(detail) {
  return JSON.stringify({ error: detail });
}

function withCors(response) {
  const headers = new Headers(response.headers);
  for (const [name, value] of CORS) headers.append(name, value);
  return new Response(response.body, { status: response.status, headers });
}

function head(text, n) {  // text[:n]: Python counts code points
  return Array.from(text).slice(0, n).join("");
}

const hex = (n, width) => n.toString(16).padStart(width, "0");

// json.dumps(text) with ensure_ascii: everything outside printable ASCII as \uXXXX (UTF-16 units)
function pyJsonAscii(text) {
  const short = { '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f" };
  let out = '"';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    const unit = text.charCodeAt(i);
    out += short[c] ?? (unit >= 0x20 && unit <= 0x7e ? c : "\\u" + hex(unit, 4));
  }
  return out + '"';
}

// repr(text): the quote Python picks, its escapes, and non-printable characters as \x, \u or \U escapes
const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = quote;
  for (const c of text) {
    const cp = c.codePointAt(0);
    if (c === quote || c === "\\") out += "\\" + c;
    else if (c === "\t") out += "\\t";
    else if (c === "\n") out += "\\n";
    else if (c === "\r") out += "\\r";
    else if (c === " " || !NOT_PRINTABLE.test(c)) out += c;
    else if (cp <= 0xff) out += "\\x" + hex(cp, 2);
    else if (cp <= 0xffff) out += "\\u" + hex(cp, 4);
    else out += "\\U" + hex(cp, 8);
  }
  return out + quote;
}

// urllib.parse.quote(text, safe): UTF-8 bytes outside the unreserved and safe characters as %XX
function quote(text, safe) {
  let out = "";
  for (const byte of new TextEncoder().encode(text)) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_.~-]/.test(c) || (byte < 0x80 && safe.includes(c)) ? c : "%" + hex(byte, 2).toUpperCase();
  }
  return out;
}
