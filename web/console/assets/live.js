import { api } from './api.js';

// connectLive keeps a WebSocket open like any client: a ticket from
// POST /v1/ws/ticket, then /v1/ws?ticket=… on this origin; it reconnects
// with backoff and says when it is (re)connected so views can refetch what
// they may have missed.
export function connectLive({ onFrame, onState }) {
  let ws = null;
  let stopped = false;
  let delay = 500;
  let timer = null;

  const retry = () => {
    if (stopped) return;
    timer = setTimeout(open, delay);
    delay = Math.min(delay * 2, 10000);
  };

  async function open() {
    if (stopped) return;
    let ticket;
    try {
      ({ ticket } = await api('POST', '/v1/ws/ticket'));
    } catch (e) {
      onState(e.status === 401 ? 'signed-out' : 'offline');
      if (e.status !== 401) retry();
      return;
    }
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    ws = new WebSocket(`${proto}//${location.host}/v1/ws?ticket=${encodeURIComponent(ticket)}`);
    ws.onopen = () => { delay = 500; onState('live'); };
    ws.onmessage = (m) => {
      let f;
      try { f = JSON.parse(m.data); } catch { return; }
      onFrame(f);
    };
    ws.onclose = () => { ws = null; onState('offline'); retry(); };
  }

  open();
  return {
    close() {
      stopped = true;
      clearTimeout(timer);
      if (ws) ws.close(1000);
    },
  };
}
