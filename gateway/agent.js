'use strict';
// hxstate-gateway/agent: HxAgent, @ag-ui/client's HttpAgent for a
// gateway's agents, with AG-UI's connect.
//
//   const { HxAgent } = require('hxstate-gateway/agent');
//   const agent = new HxAgent({ url: `${base}/agents/sessions/s-42`, headers: { authorization: `Bearer ${token}` } });
//   await agent.connectAgent();   // a page (re)loaded: the thread's state and messages, and the run in progress to its end
//   await agent.runAgent({ ... }); // a run, as HttpAgent's
//
// HttpAgent implements run (POST /agents/<table>/<key>) but not connect,
// so its connectAgent() does nothing.  HxAgent's connect is POST
// /agents/<table>/<key>/connect (README.md, "POST .../connect"): the
// thread's state and conversation, what a run in progress has open
// (reopened with what it holds so far), then that run's events until it
// ends; at once RUN_FINISHED when no run is in progress.  So a page that
// reloads in the middle of a message shows it growing again where it was.
//
// Needs @ag-ui/client (1.0), a peer dependency: the application has it.
const { HttpAgent, runHttpRequest, transformHttpEventStream } = require('@ag-ui/client');

class HxAgent extends HttpAgent {
  /** The URL of the connect: the agent's URL with /connect. */
  get connectUrl() {
    const u = new URL(this.url, 'http://agent.invalid');
    u.pathname = `${u.pathname.replace(/\/+$/, '')}/connect`;
    return /^[a-z][a-z0-9+.-]*:/i.test(this.url) ? u.href : `${u.pathname}${u.search}`;
  }

  /** A connect gets an abort controller of its own, as a run does (abortRun() ends it). */
  connectAgent(parameters, subscriber) {
    this.abortController = (parameters && parameters.abortController) || new AbortController();
    return super.connectAgent(parameters, subscriber);
  }

  connect(input) {
    return transformHttpEventStream(runHttpRequest(() => this.fetch(this.connectUrl, this.requestInit(input))), this.debugLogger);
  }
}

module.exports = { HxAgent };
