// Types of lower-jinja.mjs (plain JavaScript, which the build runs before anything is compiled), for its tests.

/** The package's ESM entry point, as this project resolves it. */
export function jinjaPackageEntry(): string;
/** `code` (an ES module) with class fields as constructor assignments. */
export function lowerClassFields(code: string): string;
/** Writes the lowered copy of the installed package to `dest`. */
export function writeLoweredJinja(dest: string): void;
