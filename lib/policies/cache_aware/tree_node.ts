/**
 * The node fields both radix trees share, and the functions that read and change a node's
 * tenants and children. Most nodes of a real tree have one tenant and at most one child (a
 * conversation's turns form a chain), so those are held inline and a Map is made only for a
 * second one: this halves the memory per cached character (a V8 Map costs ~190 bytes).
 */

/** The fields shared by the nodes of both trees. */
export interface CoreNode<N extends CoreNode<N>> {
  /** Key under which the parent holds this node (first char code, or first-page hash). */
  key: number;
  /** Edge length in units (characters or tokens). */
  len: number;
  /** Parent; null for the root and for nodes cut from the tree. */
  parent: N | null;
  /** The only child, when there is exactly one and `children` is null. */
  child: N | null;
  /** Children by key (heads of `next` chains), when there are two or more. */
  children: Map<number, N> | null;
  /** Next sibling with the same key (token page-hash collisions); null otherwise. */
  next: N | null;
  /** The only tenant, when there is exactly one and `tenants` is null. */
  tenant: string | null;
  /** The only tenant's last-access stamp. */
  stamp: number;
  /** Tenant → last-access stamp, when there are two or more. */
  tenants: Map<string, number> | null;
}

/** Number of tenants on `node`. */
export function tenantCount<N extends CoreNode<N>>(node: N): number {
  return node.tenants !== null ? node.tenants.size : node.tenant !== null ? 1 : 0;
}

/** The stamp of `tenant` on `node`, or undefined when it is not there. */
export function stampOf<N extends CoreNode<N>>(node: N, tenant: string): number | undefined {
  if (node.tenants !== null) return node.tenants.get(tenant);
  return node.tenant === tenant ? node.stamp : undefined;
}

/** Sets `tenant`'s stamp on `node`; true when the tenant was not there before. */
export function setStamp<N extends CoreNode<N>>(node: N, tenant: string, stamp: number): boolean {
  const tenants = node.tenants;
  if (tenants !== null) {
    const before = tenants.size;
    tenants.set(tenant, stamp);
    return tenants.size !== before;
  }
  if (node.tenant === tenant) {
    node.stamp = stamp;
    return false;
  }
  if (node.tenant === null) {
    node.tenant = tenant;
    node.stamp = stamp;
  } else {
    node.tenants = new Map([[node.tenant, node.stamp], [tenant, stamp]]);
    node.tenant = null;
  }
  return true;
}

/** Removes `tenant` from `node`; true when it was there. */
export function dropTenant<N extends CoreNode<N>>(node: N, tenant: string): boolean {
  const tenants = node.tenants;
  if (tenants === null) {
    if (node.tenant !== tenant) return false;
    node.tenant = null;
    return true;
  }
  if (!tenants.delete(tenant)) return false;
  if (tenants.size === 1) {
    for (const [t, s] of tenants) [node.tenant, node.stamp] = [t, s];
    node.tenants = null;
  }
  return true;
}

/** Calls `fn` with each tenant of `node` and its stamp. */
export function forEachTenant<N extends CoreNode<N>>(
  node: N,
  fn: (stamp: number, tenant: string) => void,
): void {
  if (node.tenants !== null) node.tenants.forEach(fn);
  else if (node.tenant !== null) fn(node.stamp, node.tenant);
}

/** Gives `to` the tenants and stamps of `from` (a split's new intermediate). */
export function copyTenants<N extends CoreNode<N>>(from: N, to: N): void {
  to.tenant = from.tenant;
  to.stamp = from.stamp;
  to.tenants = from.tenants === null ? null : new Map(from.tenants);
}

/** The first child of `node` under `key` (follow `next` for page-hash collisions). */
export function childAt<N extends CoreNode<N>>(node: N, key: number): N | undefined {
  const only = node.child;
  if (only !== null) return only.key === key ? only : undefined;
  return node.children?.get(key);
}

/** Hangs `child` under `parent` by `child.key`. */
export function linkChild<N extends CoreNode<N>>(parent: N, child: N): void {
  child.parent = parent;
  child.next = null;
  let children = parent.children;
  if (children === null) {
    const only = parent.child;
    if (only === null) {
      parent.child = child;
      return;
    }
    children = parent.children = new Map([[only.key, only]]);
    parent.child = null;
  }
  const head = children.get(child.key);
  if (head !== undefined) child.next = head;
  children.set(child.key, child);
}

/** Takes `child` out of `parent`'s children. */
export function unlinkChild<N extends CoreNode<N>>(parent: N, child: N): void {
  if (parent.child === child) {
    parent.child = null;
    return;
  }
  const children = parent.children!;
  const head = children.get(child.key)!;
  if (head === child) {
    if (child.next === null) children.delete(child.key);
    else children.set(child.key, child.next);
  } else {
    let prev = head;
    while (prev.next !== child) prev = prev.next!;
    prev.next = child.next;
  }
  child.next = null;
  if (children.size === 0) parent.children = null;
  else if (children.size === 1) {
    const [only] = children.values();
    if (only.next === null) [parent.child, parent.children] = [only, null];
  }
}

/** The children of `node`, collision chains included. */
export function childrenOf<N extends CoreNode<N>>(node: N): N[] {
  if (node.child !== null) return [node.child];
  const all: N[] = [];
  if (node.children === null) return all;
  for (const head of node.children.values()) {
    for (let c: N | null = head; c !== null; c = c.next) all.push(c);
  }
  return all;
}

/** Whether some child of `node` carries `tenant`. */
export function hasChildWith<N extends CoreNode<N>>(node: N, tenant: string): boolean {
  if (node.child !== null) return stampOf(node.child, tenant) !== undefined;
  if (node.children === null) return false;
  for (const head of node.children.values()) {
    for (let c: N | null = head; c !== null; c = c.next) {
      if (stampOf(c, tenant) !== undefined) return true;
    }
  }
  return false;
}
