import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { paginate, paginateIds } from '../../../csi/paging.js';
import { expectThrows } from '../../shared/expect-error.js';

const items = (...ids: string[]) => ids.map((id) => ({ id }));
const ids = (page: { items: { id: string }[] }) => page.items.map((i) => i.id);
const FIVE = items('a', 'b', 'c', 'd', 'e');

/** Every page of a listing, following next tokens until the last page. */
function allPages(list: readonly { id: string }[], max: number): string[][] {
  const pages: string[][] = [];
  let token = '';
  do {
    const page = paginate(list, { max_entries: max, starting_token: token }, 'volumes');
    pages.push(ids(page));
    token = page.nextToken;
  } while (token && pages.length < 100);
  return pages;
}

describe('paging: max_entries and the last page', () => {
  it('max_entries 0 means everything, in one page with no next token', () => {
    expect(paginate(FIVE, { max_entries: 0, starting_token: '' }, 'volumes')).toEqual({ items: FIVE, nextToken: '' });
  });

  it('pages hold max_entries items; the last page, and only it, has an empty next token', () => {
    expect(allPages(FIVE, 2)).toEqual([['a', 'b'], ['c', 'd'], ['e']]);
  });

  it('a page that ends exactly at the last item is the last page', () => {
    expect(allPages(items('a', 'b', 'c', 'd'), 2)).toEqual([['a', 'b'], ['c', 'd']]);
    expect(paginate(FIVE, { max_entries: 5, starting_token: '' }, 'volumes').nextToken).toBe('');
  });

  it('an empty listing is one empty last page', () => {
    expect(paginate([], { max_entries: 3, starting_token: '' }, 'snapshots')).toEqual({ items: [], nextToken: '' });
  });

  it.each([[-1], [1.5], [Number.NaN]])('max_entries %s is INVALID_ARGUMENT', (max) => {
    expectThrows(() => paginate(FIVE, { max_entries: max, starting_token: '' }, 'volumes'), 'InvalidArgument', 'max_entries must not be negative');
  });
});

describe('paging: a token names the last id handed out, so changes between pages neither repeat nor skip', () => {
  it('an entry deleted after its page was handed out does not shift the next page', () => {
    const first = paginate(FIVE, { max_entries: 2, starting_token: '' }, 'volumes');
    const next = paginate(items('a', 'c', 'd', 'e'), { max_entries: 2, starting_token: first.nextToken }, 'volumes');
    expect(ids(next)).toEqual(['c', 'd']);
  });

  it('an entry created before the position is not handed out again, one created after it is', () => {
    const first = paginate(items('b', 'd', 'f'), { max_entries: 2, starting_token: '' }, 'volumes');
    const next = paginate(items('a', 'b', 'c', 'd', 'e', 'f'), { max_entries: 2, starting_token: first.nextToken }, 'volumes');
    expect(ids(next)).toEqual(['e', 'f']);
  });

  it('the entry a token names may itself be gone', () => {
    const first = paginate(FIVE, { max_entries: 2, starting_token: '' }, 'volumes');
    expect(ids(paginate(items('a', 'c'), { max_entries: 2, starting_token: first.nextToken }, 'volumes'))).toEqual(['c']);
  });
});

describe('paging: a token twinvol did not issue for this listing is ABORTED (the CO starts over)', () => {
  const token = paginate(FIVE, { max_entries: 2, starting_token: '' }, 'volumes').nextToken;
  const bad = (t: string, listing: 'volumes' | 'snapshots' = 'volumes') =>
    expectThrows(() => paginate(FIVE, { max_entries: 2, starting_token: t }, listing), 'Aborted', 'is not a token twinvol issued for this listing');

  it('the token of the volume listing does not page snapshots', () => {
    bad(token, 'snapshots');
  });

  it.each([
    ['garbage', 'not-a-token'],
    ['a truncated token', token.slice(0, -3)],
    ['one character changed', `${token.slice(0, 4)}${token[4] === 'A' ? 'B' : 'A'}${token.slice(5)}`],
    ['padding added (decodes the same, but is not what twinvol wrote)', `${token}==`],
    ['characters base64 skips', `${token.slice(0, 4)}!${token.slice(4)}`],
    ['a well-formed token with a wrong checksum', Buffer.from('volumes\nb\nAAAAAAAAAAAA').toString('base64url')],
    ['a well-formed token with an extra line', Buffer.from(`${Buffer.from(token, 'base64url').toString()}\nmore`).toString('base64url')],
    ['a token that names no id', Buffer.from('volumes\n\n').toString('base64url')],
  ])('%s', (_, t) => {
    bad(t);
  });

  it('the refused token is quoted clipped, not echoed whole', () => {
    const err = bad(`x${'y'.repeat(10_000)}`);
    expect(err.message.length).toBeLessThan(200);
  });
});

describe('paging: bare ids page as objects with those ids do', () => {
  /** What a page is, said the slow way: every id after the token's, the first max_entries of them. */
  const reference = (list: readonly string[], after: string | undefined, max: number) => {
    const rest = after === undefined ? list : list.filter((id) => id > after);
    return max && rest.length > max ? rest.slice(0, max) : rest;
  };
  const tokenAfter = (id: string) => paginateIds([id, `${id}~`], { max_entries: 1, starting_token: '' }, 'volumes').nextToken;

  it('holds for any sorted listing, any page size, and a token naming any id, there or not', () => {
    const sortedIds = fc.uniqueArray(fc.stringMatching(/^[a-z0-9-]{1,6}$/), { maxLength: 40 }).map((a) => a.sort());
    fc.assert(
      fc.property(sortedIds, fc.integer({ min: 0, max: 12 }), fc.option(fc.stringMatching(/^[a-z0-9-]{1,6}$/), { nil: undefined }), (list, max, after) => {
        const token = after === undefined ? '' : tokenAfter(after);
        const page = paginateIds(list, { max_entries: max, starting_token: token }, 'volumes');
        const want = reference(list, after, max);
        expect(page.items).toEqual(want);
        expect(paginate(list.map((id) => ({ id })), { max_entries: max, starting_token: token }, 'volumes').items.map((i) => i.id)).toEqual(want);
        // A next token exactly when something follows the page, and it names the page's last id.
        const follows = want.length > 0 && list.indexOf(want[want.length - 1]!) < list.length - 1;
        expect(page.nextToken).toBe(follows ? tokenAfter(want[want.length - 1]!) : '');
      }),
      { numRuns: 500 },
    );
  });
});
