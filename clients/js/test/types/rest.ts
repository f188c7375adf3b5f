// Compile-time checks of the REST client's declarations (npm run check-types):
// the generated types reach callers, and misuse is a type error.
import { createRestClient, ProblemError, type Schema } from '../../index.js';

const api = createRestClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'sbk_x' });

export async function checks(): Promise<void> {
  const reg = await api.POST('/v1/auth/register', { body: { email: 'a@example.com', password: 'password-123' } });
  const token: string = reg.token;
  const task: Schema<'Task'> = await api.POST('/v1/tasks', {
    body: { name: 'n', schedule: null, action: { type: 'publish', event: 'e' } },
  });
  const run = await api.POST('/v1/tasks/{id}/runs', { params: { path: { id: task.id } }, body: {} });
  const status: string = run.status;
  const runs = await api.GET('/v1/tasks/{id}/runs', { params: { path: { id: task.id }, query: { limit: 10 } } });
  const first: Schema<'Run'> | undefined = runs.items?.[0];
  const deleted: undefined = await api.DELETE('/v1/tasks/{id}', { params: { path: { id: task.id } } });
  const me = await api.GET('/v1/me');
  void [token, status, first, deleted, me];

  // @ts-expect-error unknown route
  await api.GET('/v1/nope');
  // @ts-expect-error the path parameter is required
  await api.GET('/v1/tasks/{id}');
  // @ts-expect-error wrong body field type
  await api.POST('/v1/auth/register', { body: { email: 1, password: 'x' } });
  // @ts-expect-error GET has no body
  await api.GET('/v1/me', { body: {} });
  // @ts-expect-error there is no PUT on /v1/me
  await api.PUT('/v1/me');

  try { await api.GET('/v1/me'); } catch (err) {
    if (err instanceof ProblemError) { const s: number = err.status; const d: string | undefined = err.detail; void [s, d]; }
  }
}
