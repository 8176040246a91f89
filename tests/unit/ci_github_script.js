// Runs an actions/github-script step's script as the action does: an async function of
// `require`, `github`, `context`, `core`, its `github.rest.issues.*` calls real HTTP requests
// to the forge at GITHUB_API_URL (a test's forge on loopback), errors thrown on a 4xx/5xx as
// Octokit throws them. Usage: node ci_github_script.js SCRIPT_FILE (the step's env in the env).
'use strict';
const fs = require('fs');

const api = process.env.GITHUB_API_URL;
const [owner, repo] = process.env.GITHUB_REPOSITORY.split('/');

async function request(method, route, params) {
  const rest = { ...params };
  const path = route.replace(/\{(\w+)\}/g, (_, name) => {
    const value = rest[name];
    delete rest[name];
    return encodeURIComponent(String(value));
  });
  const hasBody = method === 'POST' || method === 'PATCH' || method === 'PUT';
  const query = hasBody ? '' : new URLSearchParams(rest).toString();
  const answer = await fetch(`${api}${path}${query ? `?${query}` : ''}`, {
    method,
    headers: { authorization: `token ${process.env.GITHUB_TOKEN}`, 'content-type': 'application/json' },
    body: hasBody ? JSON.stringify(rest) : undefined,
  });
  const text = await answer.text();
  const data = text ? JSON.parse(text) : undefined;
  if (answer.status >= 400) {
    const error = new Error(`${method} ${path}: ${answer.status} ${data && data.message}`);
    error.status = answer.status;
    throw error;
  }
  return { status: answer.status, data };
}

const endpoint = (method, route) => (params) => request(method, route, params);
const issues = '/repos/{owner}/{repo}/issues';
const github = {
  rest: {
    issues: {
      listComments: endpoint('GET', `${issues}/{issue_number}/comments`),
      createComment: endpoint('POST', `${issues}/{issue_number}/comments`),
      updateComment: endpoint('PATCH', `${issues}/comments/{comment_id}`),
      deleteComment: endpoint('DELETE', `${issues}/comments/{comment_id}`),
      addLabels: endpoint('POST', `${issues}/{issue_number}/labels`),
      removeLabel: endpoint('DELETE', `${issues}/{issue_number}/labels/{name}`),
    },
  },
  // Octokit follows the Link header; the forge's pages end with a short one.
  async paginate(method, params) {
    const size = params.per_page || 30;
    const all = [];
    for (let page = 1; ; page += 1) {
      const { data } = await method({ ...params, page });
      all.push(...data);
      if (data.length < size) return all;
    }
  },
};

const context = {
  repo: { owner, repo },
  issue: { owner, repo, number: parseInt(process.env.PR_NUMBER, 10) },
  serverUrl: process.env.GITHUB_SERVER_URL,
  runId: parseInt(process.env.GITHUB_RUN_ID, 10),
};

const core = {
  info: (message) => console.log(message),
  warning: (message) => console.log(`::warning::${message}`),
  setFailed: (message) => {
    console.log(`::error::${message}`);
    process.exitCode = 1;
  },
};

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor;
const script = fs.readFileSync(process.argv[2], 'utf8');
new AsyncFunction('require', 'github', 'context', 'core', script)(require, github, context, core)
  .catch((error) => core.setFailed(`Unhandled error: ${error.message}`));
