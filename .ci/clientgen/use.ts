// The TypeScript half of .ci/check-clients: a program against the types
// openapi-typescript generates from openapi.json (formsapi.d.ts, beside
// it), type-checked with tsc --strict. It builds the list's, the
// export's and the summary's query parameters with the filter operators
// (deepObject), q, fields, total, sort, sync, interval and top, and
// serializes them as the server reads them;
// the @ts-expect-error lines fail the check if the types let a wrong
// operator or value through.
import type { operations } from "./formsapi";

type ListQuery = NonNullable<operations["listSubmissions"]["parameters"]["query"]>;
type ExportQuery = NonNullable<operations["exportSubmissions"]["parameters"]["query"]>;
type SummaryQuery = NonNullable<operations["getSummary"]["parameters"]["query"]>;

const list: ListQuery = {
  filter: {
    yearsOfExperience: { gte: "5", lte: "7" },
    email: { in: "ada@example.com,alan@example.net" },
    referee: { exists: "true", ne: "Jean Bartik" },
    name: { prefix: "a" },
    position: "Backend engineer",
  },
  q: "zoe",
  fields: ["name", "email"],
  total: "exact",
  limit: 50,
};
const feed: ListQuery = { sync: "start", limit: 100 };
const exported: ExportQuery = { filter: { yearsOfExperience: { gte: "5" } }, q: "zoe", format: "csv" };
const sorted: ListQuery = { sort: "-yearsOfExperience", filter: { yearsOfExperience: { lt: "5" } }, limit: 20 };
const summary: SummaryQuery = { interval: "week", top: 2, filter: { rating: { gte: "4" } }, q: "zoe" };

// @ts-expect-error: no such operator
const badOperator: ListQuery = { filter: { rating: { between: "1,5" } } };
// @ts-expect-error: exists is "true" or "false"
const badExists: ListQuery = { filter: { rating: { exists: "yes" } } };
// @ts-expect-error: total is "exact" or "estimate"
const badTotal: ListQuery = { total: "all" };
// @ts-expect-error: interval is "hour", "day" or "week"
const badInterval: SummaryQuery = { interval: "month" };

// deepObject, as the server reads it: filter[<field>]=<value> and
// filter[<field>][<op>]=<value>; an array parameter once per item.
function query(q: ListQuery | ExportQuery | SummaryQuery): string {
  const out = new URLSearchParams();
  for (const [name, value] of Object.entries(q)) {
    if (name === "filter" && value && typeof value === "object") {
      for (const [field, clause] of Object.entries(value as Record<string, string | Record<string, string>>)) {
        if (typeof clause === "string") {
          out.append(`filter[${field}]`, clause);
        } else {
          for (const [op, v] of Object.entries(clause)) out.append(`filter[${field}][${op}]`, v);
        }
      }
    } else if (Array.isArray(value)) {
      for (const v of value) out.append(name, String(v));
    } else if (value !== undefined) {
      out.append(name, String(value));
    }
  }
  return out.toString();
}

export const urls: string[] = [list, feed, exported, sorted, summary].map(query);
export const refused = [badOperator, badExists, badTotal, badInterval];
