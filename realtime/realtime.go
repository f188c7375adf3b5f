// Package realtime owns WebSocket delivery: Melody hubs, rooms, the
// pg_notify bus between replicas, tickets, server-to-client RPC and presence.
package realtime
