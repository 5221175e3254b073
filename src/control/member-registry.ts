/**
 * The in-memory MemberRegistry: the rollout workers and trainers one process knows (the
 * single-process run, and tests). src/control/redis/redis-members.ts shares them across processes.
 */
import type { MemberKind, MemberRegistry } from './control-stores.ts';

export class InMemoryMemberRegistry implements MemberRegistry {
  private readonly members: Record<MemberKind, Map<string, Readonly<Record<string, unknown>>>> = { rollout: new Map(), trainer: new Map() };

  async register(kind: MemberKind, id: string, info: Readonly<Record<string, unknown>>): Promise<void> {
    this.members[kind].set(id, info);
  }

  async has(kind: MemberKind, id: string): Promise<boolean> {
    return this.members[kind].has(id);
  }

  async count(kind: MemberKind): Promise<number> {
    return this.members[kind].size;
  }
}
