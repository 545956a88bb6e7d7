import { Redis } from 'ioredis';
import { startRedisCluster } from './test/helpers/redis-cluster.ts';
const c = await startRedisCluster({ replicas: 1 });
const r = new Redis({ port: c.servers[0]!.port });
console.log(JSON.stringify(await r.call('CLUSTER', 'SLOTS')));
console.log(c.servers.map((s) => s.port));
console.log(await r.call('CLUSTER', 'NODES'));
r.disconnect();
await c.stop();
