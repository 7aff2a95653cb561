// Who may call what: the admin token reaches everything, a program key reaches only its own
// program's inference routes, entry and trace. Pure policy over a ProgramKeyTable (no I/O).
import { ArborError } from "../../core/errors.js";
import { forbidden, unauthenticated } from "./auth-errors.js";
import { ProgramKeyTable, secretsEqual } from "./key-table.js";

export interface AuthConfig {
  /** Bearer token of the orchestrator/operator: /programs, /programs/:id/release, /admin/*. At least 16 characters. */
  adminToken: string;
  /**
   * true: every inference call needs its program's key (programs must be created with POST /programs).
   * false: programs created with a key still need it, programs opened on first call stay open.
   */
  requireProgramKeys: boolean;
}

/** Who a request authenticated as. */
export type Principal = { kind: "admin" } | { kind: "program"; programId: string } | { kind: "anonymous" };

/** Headers a credential may come in: `authorization: Bearer …` (OpenAI SDK) or `x-api-key` (Anthropic SDK). */
export interface CredentialHeaders {
  authorization?: string | string[] | undefined;
  "x-api-key"?: string | string[] | undefined;
}

/** The credential a request carries, or undefined. */
export function credentialOf(headers: CredentialHeaders): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === "string") {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
    if (m) return m[1];
  }
  const apiKey = headers["x-api-key"];
  return typeof apiKey === "string" && apiKey !== "" ? apiKey : undefined;
}

/** Authentication and authorization decisions for one gateway. */
export class GatewayAuth {
  constructor(
    private readonly config: AuthConfig,
    readonly keys: ProgramKeyTable,
  ) {
    if (typeof config.adminToken !== "string" || config.adminToken.length < 16) {
      throw new ArborError("auth.adminToken: must be a secret of at least 16 characters", "config");
    }
    if (typeof config.requireProgramKeys !== "boolean") {
      throw new ArborError(`auth.requireProgramKeys: must be true or false, got ${String(config.requireProgramKeys)}`, "config");
    }
  }

  /** Resolve the request's credential; a credential that matches nothing is a 401. */
  identify(headers: CredentialHeaders): Principal {
    const cred = credentialOf(headers);
    if (cred === undefined) return { kind: "anonymous" };
    if (secretsEqual(cred, this.config.adminToken)) return { kind: "admin" };
    const programId = this.keys.programOf(cred);
    if (programId === undefined) throw unauthenticated("invalid API key: it matches no program key and not the admin token");
    return { kind: "program", programId };
  }

  /** /programs, release, /admin/*: only the admin token. */
  requireAdmin(headers: CredentialHeaders): void {
    const who = this.identify(headers);
    if (who.kind === "anonymous") throw unauthenticated("missing credential: this endpoint needs the admin token as 'Authorization: Bearer <token>'");
    if (who.kind === "program") throw forbidden(`a program key cannot use admin endpoints (key of program '${who.programId}')`);
  }

  /** GET /programs/:id and its trace: the admin token or that program's own key. */
  requireProgramReader(headers: CredentialHeaders, programId: string): void {
    const who = this.identify(headers);
    if (who.kind === "anonymous") throw unauthenticated(`missing credential: send program '${programId}''s API key as 'Authorization: Bearer <key>'`);
    this.mustOwn(who, programId);
  }

  /** An inference call of `programId`: its own key (or the admin token); open only for unkeyed programs when keys are not required. */
  requireCaller(headers: CredentialHeaders, programId: string): void {
    const who = this.identify(headers);
    if (who.kind === "anonymous") {
      if (!this.config.requireProgramKeys && !this.keys.hasKey(programId)) return;
      throw unauthenticated(`missing API key: program '${programId}' needs its key as the client's apiKey ('Authorization: Bearer <key>')`);
    }
    this.mustOwn(who, programId);
  }

  /**
   * An inference call that names its program in neither path nor header, checked before its body
   * is read: the credential must be valid, and an anonymous caller is refused, since which program
   * it calls (and so whether it may) would only show after parsing a body of up to the body limit.
   */
  requireBodyNamedCaller(headers: CredentialHeaders): void {
    if (this.identify(headers).kind !== "anonymous") return;
    throw unauthenticated(
      "missing API key: send the program's key as 'Authorization: Bearer <key>', or (for programs without a key) name the program in the path /p/<program-id>/v1/... or header 'x-arbor-program'",
    );
  }

  /** Routes that name no program (/v1/models): any valid credential, or none when keys are not required. */
  requireAnyCaller(headers: CredentialHeaders): void {
    const who = this.identify(headers);
    if (who.kind === "anonymous" && this.config.requireProgramKeys) {
      throw unauthenticated("missing API key: send a program key or the admin token as 'Authorization: Bearer <key>'");
    }
  }

  private mustOwn(who: Principal, programId: string): void {
    if (who.kind === "program" && who.programId !== programId) {
      throw forbidden(`this API key belongs to program '${who.programId}', not to program '${programId}'`);
    }
  }
}
