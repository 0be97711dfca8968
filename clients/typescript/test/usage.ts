// Type-level checks of the published declarations (dist/*.d.ts): compiled with
// `tsc --noEmit -p test` by types.test.mjs, never run. A wrong type is a compile error.
import {
  Navi,
  NaviError,
  type DoneEvent,
  type Hit,
  type PendingCall,
  type ResponseOf,
  type Schemas,
  type Session,
  type TurnEvent,
} from "../dist/index.js";

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assertType = <T extends true>(): T => true as T;

assertType<Equal<ResponseOf<"/sessions", "post">, Schemas["SessionOut"]>>();
assertType<Equal<ResponseOf<"/sessions/{session_id}", "delete">, void>>();
assertType<Equal<TurnEvent["event"], "token" | "thinking" | "tool_call" | "tool_result" | "compression" | "recall" | "usage" | "done" | "error">>();

export async function usage(navi: Navi): Promise<void> {
  const session: Session = await navi.sessions.create({ name: "typed" });
  const id: string = session.id;
  await navi.messages.append(id, [{ role: "user", content: "hi" }], {
    usage: { model: "m", prompt_eval_count: 1 },
  });
  // @ts-expect-error: a role the service does not know
  await navi.messages.append(id, [{ role: "robot", content: "hi" }]);
  const page = await navi.sessions.list({ limit: 10, offset: 0 });
  const first: string | undefined = page.items[0]?.id;
  void first;
  const found = await navi.memory.search({ query: "port", k: 3 });
  const hits: Hit[] = found.hits;
  void hits;
  // @ts-expect-error: `query` is required
  await navi.memory.search({ k: 3 });
  const history = await navi.messages.history(id, { beforeSeq: 10 });
  const seq: number = history.messages[0]!.sequence_number;
  void seq;

  const stream = navi.streamTurn(id, "hello");
  for await (const ev of stream) {
    switch (ev.event) {
      case "token":
        ev.text satisfies string;
        break;
      case "tool_call":
        ev.arguments satisfies Record<string, unknown>;
        ev.builtin satisfies boolean;
        break;
      case "usage":
        ev.prompt_eval_count satisfies number;
        break;
      case "done": {
        const d: DoneEvent = ev;
        void d;
        break;
      }
      case "error":
        ev.status satisfies number;
        break;
    }
  }
  const pending: PendingCall[] = stream.pending;
  const out = await navi.resumeTurn(
    id,
    pending.map((p) => ({ tool_call_id: p.id, content: "ok" })),
  );
  out.status satisfies "completed" | "requires_action" | "max_rounds" | "interrupted" | "failed";

  try {
    await navi.sessions.get(id);
  } catch (e) {
    if (e instanceof NaviError) {
      e.status satisfies number;
      e.error satisfies string;
      e.detail satisfies string;
    }
  }
}
