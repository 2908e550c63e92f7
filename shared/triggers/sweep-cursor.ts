export type Pass = 'services' | 'executors';

/** Where the sweep goes on. Kept in process memory: a new process starts from the beginning, which only costs reads. */
export class SweepCursor {
  namespaceIndex = 0;
  pass: Pass = 'services';
  /** The token that lists the current page (undefined: the first page). */
  pageToken: string | undefined;
  /** Items of the current page already decided. */
  skip = 0;
  /** Our Services counted so far in the current namespace's Services pass. */
  counted = 0;
  /** Complete rounds over every watched namespace, both passes. */
  rounds = 0;
  running = false;
}
