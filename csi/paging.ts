import { createHash } from 'node:crypto';
import { aborted, invalidArgument } from '../shared/index.js';
import type { ListRequest } from './csi-types.js';

export interface Page<T> {
  items: T[];
  /** "" when nothing follows. */
  nextToken: string;
}

/**
 * Pages through items sorted by id. A token names the last id handed out, so entries created or
 * deleted between two pages neither repeat nor shift the rest. Tokens are opaque to the CO and carry
 * the listing they belong to; one twinvol did not issue (or issued for the other listing) is ABORTED,
 * which tells the CO to start over.
 */
export function paginate<T extends { id: string }>(items: readonly T[], req: ListRequest, listing: Listing): Page<T> {
  return pageOf(items, (item) => item.id, req, listing);
}

/** `paginate` of bare ids: ListVolumes pages over the catalog's kept listing without a copy of it. */
export function paginateIds(ids: readonly string[], req: ListRequest, listing: Listing): Page<string> {
  return pageOf(ids, (id) => id, req, listing);
}

type Listing = 'volumes' | 'snapshots';

/**
 * The page is found by binary search and sliced, not filtered: a listing of 10,000 volumes is one
 * page of 1 in a pager's first call, and mapping or copying all of it cost more than the page.
 */
function pageOf<T>(items: readonly T[], idOf: (item: T) => string, req: ListRequest, listing: Listing): Page<T> {
  if (!Number.isInteger(req.max_entries) || req.max_entries < 0) throw invalidArgument('max_entries must not be negative');
  const after = req.starting_token ? decodeToken(req.starting_token, listing) : undefined;
  const start = after === undefined ? 0 : firstAfter(items, idOf, after);
  const end = req.max_entries ? Math.min(items.length, start + req.max_entries) : items.length;
  return { items: items.slice(start, end), nextToken: end < items.length ? encodeToken(listing, idOf(items[end - 1]!)) : '' };
}

/** The index of the first item whose id sorts after `after` (items sorted by id, as `<` compares). */
function firstAfter<T>(items: readonly T[], idOf: (item: T) => string, after: string): number {
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (idOf(items[mid]!) > after) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * The checksum makes a damaged token (truncated, or a character changed in transit) an error rather
 * than a different, valid-looking position; it is not a secret and does not stop deliberate forgery,
 * which gains a caller nothing it could not ask for with a fresh listing.
 */
function checksum(listing: string, lastId: string): string {
  return createHash('sha256').update(`${listing}\n${lastId}`).digest('base64url').slice(0, 12);
}

function encodeToken(listing: string, lastId: string): string {
  return Buffer.from(`${listing}\n${lastId}\n${checksum(listing, lastId)}`).toString('base64url');
}

function decodeToken(token: string, listing: string): string {
  const text = Buffer.from(token, 'base64url').toString();
  const [kind, lastId, sum, ...extra] = text.split('\n');
  // Base64 decoding skips characters it does not know: a token is ours only if it round-trips.
  if (kind !== listing || !lastId || sum !== checksum(listing, lastId) || extra.length || encodeToken(listing, lastId) !== token)
    throw aborted(`starting_token ${JSON.stringify(token.slice(0, 64))} is not a token twinvol issued for this listing`);
  return lastId;
}
