// A small typed REST client for Switchboard's HTTP API: a fetch wrapper, no
// dependencies. Its types (index.d.ts) come from src/api.d.ts, generated from
// the served OpenAPI document (`npm run gen`; CI fails when it drifts).

/** A non-2xx answer: the server's application/problem+json, as an Error. */
export class ProblemError extends Error {
  constructor(status, problem, method, path) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(`${method} ${path}: ${status} ${p.title ?? ''}${p.detail ? `: ${p.detail}` : ''}`.trimEnd());
    this.name = 'ProblemError';
    this.status = status;
    this.title = p.title;
    this.detail = p.detail;
    this.errors = p.errors ?? [];
    this.problem = problem;
  }
}

/** Fills {name} placeholders of a route with URL-encoded values. */
function fillPath(route, params = {}) {
  return route.replace(/\{([^}]+)\}/g, (_, name) => {
    if (params[name] === undefined) throw new TypeError(`missing path parameter ${name} of ${route}`);
    return encodeURIComponent(String(params[name]));
  });
}

function queryString(query = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null) q.append(k, String(v));
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * createRestClient({baseUrl, token?, apiKey?, fetch?, headers?}) → client with
 * GET/POST/PATCH/PUT/DELETE(route, {params: {path, query, header}, body, signal}).
 * Each resolves with the parsed JSON body (undefined for 204) or rejects with a
 * ProblemError. token / apiKey may be a string or a function returning one.
 */
export function createRestClient({ baseUrl, token, apiKey, fetch: fetchFn = globalThis.fetch, headers: extra = {} } = {}) {
  if (!baseUrl) throw new TypeError('createRestClient: baseUrl is required');
  if (typeof fetchFn !== 'function') throw new TypeError('createRestClient: no fetch (pass one)');
  const base = String(baseUrl).replace(/\/+$/, '');
  const credential = () => {
    const c = typeof apiKey === 'function' ? apiKey() : apiKey ?? (typeof token === 'function' ? token() : token);
    return c ? { authorization: `Bearer ${c}` } : {};
  };

  async function request(method, route, { params = {}, body, signal } = {}) {
    const url = `${base}${fillPath(route, params.path)}${queryString(params.query)}`;
    const headers = { accept: 'application/json, application/problem+json', ...extra, ...credential(), ...params.header };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetchFn(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal });
    const text = await res.text();
    let data;
    if (text) {
      try { data = JSON.parse(text); } catch { data = text; }
    }
    if (!res.ok) throw new ProblemError(res.status, data, method, route);
    return data;
  }

  const client = { request };
  for (const m of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) client[m] = (route, init) => request(m, route, init);
  return client;
}
