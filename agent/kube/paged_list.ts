/**
 * Lists a resource in pages (`limit` / `continue`, 500 items a page, as
 * client-go's reflector does), reducing each item to its slim form as the
 * page arrives, so a cold start never holds a whole list's JSON text and
 * parse tree at once. With a {@link ListStream}, each page goes to the
 * consumer as soon as it is decoded, while the API server writes the next:
 * nothing of the list is held, and its parsing overlaps the transfer. An
 * expired continue token (410 Gone) starts the list over from the latest
 * version, as client-go does.
 *
 * @module
 */
import { ApiFetch, ApiStatusError } from "./api_fetch.ts";

/** An API object as plain JSON. */
export type Json = Record<string, unknown>;

/** Selectors and version of a list. */
export interface ListQuery {
  /** Label selector of the list. */
  labelSelector?: string;
  /** Field selector of the list. */
  fieldSelector?: string;
  /** The resourceVersion to list at ("0": the watch cache). */
  resourceVersion?: string;
  /** How resourceVersion is matched (NotOlderThan, Exact). */
  resourceVersionMatch?: string;
}

/** A list result in the shape client-node's ListWatch expects. */
export interface ListResult {
  /** The list's resourceVersion, to watch from. */
  metadata: { resourceVersion?: string };
  /** Every object of every page, slimmed. */
  items: Json[];
}

/** Where a streamed list's pages go as they are decoded. */
export interface ListStream<T = Json> {
  /** One page's items, in list order; throwing ends the list with that error. */
  page(items: T[]): void;
  /** The list starts over (an expired continue token): pages delivered so far are stale. */
  restart(): void;
}

/** Items per page, as client-go's reflector asks for. */
const PAGE_SIZE = 500;

/** One decoded page, or the news that its continue token expired. */
type PageAnswer = { page: Page } | { expired: true };

/** A list page as the API server sends it. */
interface Page {
  metadata?: { resourceVersion?: string; continue?: string };
  items: unknown[];
}

/**
 * Lists `path` page by page; `slim` reduces each item. With `opts.stream`, every page goes to
 * it and the result's `items` is empty; the next page is already asked for while the stream
 * works on one, so the API server writes it meanwhile. Throws ApiStatusError on HTTP errors.
 */
export async function pagedList(
  api: ApiFetch,
  path: string,
  query: ListQuery,
  slim: ((o: Json) => Json) | undefined,
  opts: { pageSize?: number; signal?: AbortSignal; stream?: ListStream } = {},
): Promise<ListResult> {
  const limit = opts.pageSize ?? PAGE_SIZE;
  const stream = opts.stream;
  // Ends a request asked for ahead when the list stops early (an error, a throwing stream).
  const ahead = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, ahead.signal]) : ahead.signal;
  let version = { rv: query.resourceVersion, match: query.resourceVersionMatch };
  const fetchPage = async (cont: string | undefined, retry: boolean): Promise<PageAnswer> => {
    const res = await api.get(path, {
      labelSelector: query.labelSelector,
      fieldSelector: query.fieldSelector,
      limit,
      // The version applies to the first page; the token carries it after.
      ...(cont === undefined
        ? { resourceVersion: version.rv, resourceVersionMatch: version.match }
        : { continue: cont }),
    }, signal);
    if (res.status === 410 && cont !== undefined && retry) {
      await res.body?.cancel();
      return { expired: true };
    }
    if (res.status !== 200) throw await ApiFetch.statusError(res);
    const page = await res.json() as Page;
    if (!Array.isArray(page?.items)) {
      throw new ApiStatusError(res.status, `list ${path}: the answer has no items array`);
    }
    return { page };
  };
  try {
    for (let attempt = 0;; attempt++) {
      const items: Json[] = [];
      let rv: string | undefined;
      let next: Promise<PageAnswer> | undefined = fetchPage(undefined, attempt < 3);
      let expired = false;
      while (next !== undefined) {
        const answer: PageAnswer = await next;
        if ("expired" in answer) {
          expired = true;
          break;
        }
        const page: Page = answer.page;
        rv = page.metadata?.resourceVersion;
        const cont: string | undefined = page.metadata?.continue || undefined;
        next = cont === undefined ? undefined : fetchPage(cont, attempt < 3);
        // Settled later, or abandoned with the list: never an unhandled rejection.
        next?.catch(() => {});
        const got = (slim ? page.items.map((o) => slim(o as Json)) : page.items) as Json[];
        if (stream) stream.page(got);
        else for (const item of got) items.push(item);
      }
      if (!expired) return { metadata: { resourceVersion: rv }, items };
      // The snapshot the token pointed at is gone: list the latest from the start.
      version = { rv: undefined, match: undefined };
      stream?.restart();
    }
  } finally {
    ahead.abort();
  }
}
