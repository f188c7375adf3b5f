import { api, setProject } from './api.js';

// The project the console acts in: the caller's projects, the one chosen
// (remembered per account in localStorage), and what its role allows.

export const ROLES = ['viewer', 'developer', 'admin', 'owner'];

// atLeast says whether role is need or above (viewer < developer < admin < owner).
export function atLeast(role, need) {
  return ROLES.indexOf(role) >= ROLES.indexOf(need);
}

const state = { user: null, list: [], current: null };
const key = () => `sb-project:${state.user?.id}`;

// current is the chosen project {id, name, personal, role}, or null.
export function current() {
  return state.current;
}

// projectList is every project of the caller, personal first.
export function projectList() {
  return state.list;
}

// loadProjects reads the caller's projects and chooses the remembered one
// (prefer: an id to choose instead), else the personal project.
export async function loadProjects(user, prefer) {
  state.user = user;
  const res = await api('GET', '/v1/projects', undefined, { inProject: false });
  state.list = res.items || [];
  let saved = prefer;
  try { saved = saved || localStorage.getItem(key()); } catch { /* storage may be off */ }
  choose(state.list.find((p) => p.id === saved) || state.list.find((p) => p.personal) || state.list[0]);
  return state.current;
}

// choose makes project the one every API call acts in, and remembers it.
export function choose(project) {
  state.current = project || null;
  setProject(project?.id);
  try { if (project) localStorage.setItem(key(), project.id); } catch { /* storage may be off */ }
}

// streamOf is the run-event stream of the chosen project.
export function streamOf(project = state.current) {
  return project ? `project:${project.id}` : '';
}
