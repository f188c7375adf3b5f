// The console's only way to the server: the public API under
// /console/api/v1/..., which the server turns into /v1/... with the
// session's token once it has checked the cookie, this CSRF token and the
// origin. Errors keep the problem's detail and errors[].message.

let csrf = '';
let project = '';

// setProject names the project every later call acts in (the
// X-Switchboard-Project header); '' is the account's personal project.
export function setProject(id) {
  project = id || '';
}

export class APIError extends Error {
  constructor(status, problem, text) {
    const p = problem && typeof problem === 'object' ? problem : {};
    super(p.detail || p.title || text || `HTTP ${status}`);
    this.status = status;
    this.detail = p.detail || p.title || text || `The server answered HTTP ${status}.`;
    this.errors = Array.isArray(p.errors) ? p.errors : [];
  }
}

async function send(url, method, body, headers = {}) {
  const init = { method, headers: { ...headers }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(url, init);
  } catch (e) {
    throw new APIError(0, { detail: 'The server cannot be reached. Check your connection and try again.' });
  }
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) throw new APIError(res.status, data, text);
  return data;
}

// api calls /v1/... through the console's session, in the chosen project
// (inProject false: without it, as for the list of projects itself).
export function api(method, path, body, { inProject = true } = {}) {
  const headers = { 'X-CSRF-Token': csrf };
  if (inProject && project) headers['X-Switchboard-Project'] = project;
  return send(`/console/api${path}`, method, body, headers);
}

export const session = {
  async current() {
    const s = await send('/console/api/session', 'GET');
    csrf = s.csrf_token;
    return s;
  },
  async signIn(email, password) {
    const s = await send('/console/api/session', 'POST', { email, password });
    csrf = s.csrf_token;
    return s;
  },
  // register uses the public route like any client, then signs in: the
  // token it answers is not kept. invite is the token an invite gave, or ''.
  async register(email, password, invite) {
    await send('/v1/auth/register', 'POST', invite ? { email, password, invite } : { email, password });
    return this.signIn(email, password);
  },
  async signOut() {
    await send('/console/api/session', 'DELETE', undefined, { 'X-CSRF-Token': csrf });
    csrf = '';
  },
};

// publicAPI calls a /v1 route that needs no account (registration policy,
// forgotten password, reset) like any client.
export function publicAPI(method, path, body) {
  return send(path, method, body);
}

// capabilities reads the served OpenAPI document: the console offers what
// this server's API has (cancel, retry, attempts, trigger input).
export async function capabilities() {
  const doc = await send('/openapi.json', 'GET');
  const ops = new Map();
  for (const item of Object.values(doc.paths || {})) {
    for (const op of Object.values(item)) {
      if (op && op.operationId) ops.set(op.operationId, op);
    }
  }
  const trigger = ops.get('task-run-create');
  const props = trigger?.requestBody?.content?.['application/json']?.schema;
  const ref = props?.$ref?.split('/').pop();
  const schema = ref ? doc.components?.schemas?.[ref] : props;
  return {
    cancel: ops.has('run-cancel'),
    retry: ops.has('run-retry'),
    attempts: ops.has('run-attempt-list'),
    triggerPayload: !!schema?.properties?.payload,
    triggerRunAt: !!schema?.properties?.run_at,
  };
}
