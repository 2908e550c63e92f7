import type { Page } from './client.ts';

/**
 * Walks a paged list (limit + continue) page by page, so that memory per page stays bounded;
 * `visit` may do API calls of its own between pages.
 */
export async function forEachPage<T>(
  fetchPage: (continueToken: string | undefined) => Promise<Page<T>>,
  visit: (items: T[], page: Page<T>) => Promise<void> | void,
): Promise<void> {
  let token: string | undefined;
  do {
    const page = await fetchPage(token);
    await visit(page.items, page);
    token = page.continueToken;
  } while (token !== undefined);
}
