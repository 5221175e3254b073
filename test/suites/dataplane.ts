/** Suites of the experience data plane (listed explicitly; test/suites.ts concatenates the areas). */
import type { Suite } from '../harness/suite.ts';
import meta from '../dataplane/meta.test.ts';
import sharding from '../dataplane/sharding.test.ts';
import observability from '../dataplane/observability.test.ts';
import { localGpuConformance, localHostConformance, noopConformance, redisConformance } from '../dataplane/backends.test.ts';
import { gatewayConformance, gatewaySuite } from '../dataplane/gateway.test.ts';
import redisFailures from '../dataplane/redis-failures.test.ts';
import redisNode from '../platform/redis-node.test.ts';
import gatewayControl from '../dataplane/gateway-control.test.ts';
import names from '../dataplane/names.test.ts';
import gatewayScopes from '../dataplane/gateway-scopes.test.ts';
import redisBackend from '../dataplane/redis-backend.test.ts';

export const dataplaneSuites: readonly Suite[] = [
  meta,
  sharding,
  observability,
  noopConformance,
  localHostConformance,
  localGpuConformance,
  redisConformance,
  redisFailures,
  redisNode,
  gatewayConformance,
  gatewaySuite,
  gatewayControl,
  names,
  gatewayScopes,
  redisBackend,
];
