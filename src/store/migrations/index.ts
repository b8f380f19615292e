import { m001Core } from "./001-core.js";
import { m002Receipts } from "./002-receipts.js";
import { m003Evaluations } from "./003-evaluations.js";
import { m004Weights } from "./004-weights.js";
import { m005Platform } from "./005-platform.js";
import { m006EpisodeHistory } from "./006-episode-history.js";
import { m008Networks } from "./008-networks.js";

import type { Migration } from "./migration.js";

export type { Migration } from "./migration.js";

/**
 * Every migration, in order. Numbers are never reused or edited once released: add a new one.
 * Reserved ranges so parallel work does not collide: 002 meter, 003 evaluation, 004 chain, 005 platform/daemon,
 * 006 evaluation (episode history), 007 evidence, 008 daemon (networks).
 */
export const MIGRATIONS: readonly Migration[] = [
  m001Core,
  m002Receipts,
  m003Evaluations,
  m004Weights,
  m005Platform,
  m006EpisodeHistory,
  m008Networks,
];
